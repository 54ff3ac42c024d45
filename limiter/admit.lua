-- ADMIT: the whole admission decision for one request, atomically.
-- KEYS, ARGV and the reply are laid out in redis.go (admitScript); local.go is the same
-- logic in Go, step for step.
--
-- Three phases, so that a refusal writes nothing: gather state and run every check
-- read-only, pick the verdict, and only if every check passed commit every reservation.
-- The exceptions run whatever the verdict (ledger requests only): the settles the call
-- carries, which run first, as their own SETTLE calls would have, and the sweep of
-- expired holds, which corrects state any call would correct (a team that is refused
-- must still get its abandoned holds back).
--
-- The script is written flat for speed: it runs on every request, and what it costs
-- inside Redis is mostly redis.call (each one converts its arguments and reply) and
-- the C functions Lua calls (string.format alone costs as much as a small command).
-- So the team's state is one hash, read by one HMGET whose fields the caller names in
-- ARGV and written by one HSET; every number is a little-endian double (struct.pack),
-- never decimal text; only the limits that apply are sent (a spec string, see
-- redis.go); each check runs inline in one loop over the spec; and the reply is one
-- packed string.
--
-- Lua 5.1 numbers are doubles, exact only for integers below 2^53. Every value here is
-- such an integer. Division is exact too: for integers with a + b < 2^53, the
-- correctly rounded a / b cannot reach the next integer, so floor(a / b) is the
-- integer quotient; Policy.Validate bounds every dividend here accordingly.

local call, min, byte, sub, format, unpack, pack, unpackd =
  redis.call, math.min, string.byte, string.sub, string.format, unpack, struct.pack, struct.unpack

-- Constants shared with Go (limiter.go, redis.go): ttlSlack, concurrencyRetryCap,
-- sweepBatch, tokenUnit, SettledWindow.
local SLACK, CONC_RETRY_CAP, SWEEP, UNIT, SETTLED_WINDOW = 10000000, 1000000, 100, 60000000, 120000000
-- The waiting room's constants (limiter.go): queueMinPoll, queueMaxPoll, queueGrace,
-- queueRebase, queueReserve, queueBacklog.
local MIN_POLL, MAX_POLL, GRACE, REBASE, RESERVE, BACKLOG = 1000, 50000, 250000, 17592186044416, 500000, 2
-- A concurrency set's TTL is extended this far past the lease it needs, so that the
-- extension (a PEXPIRE) runs about once per EXTEND rather than on every request.
local EXTEND = 30000000
local INF = 9007199254740992
-- Reasons and scopes as the reply numbers them.
local RATE, CONCURRENCY, REVOKED, CUT_OFF, BUDGET, TPM, REBUILD, QUEUED = 1, 2, 3, 4, 5, 6, 7, 8
local MEMBER, TEAM = 1, 2

local now = tonumber(ARGV[1])
if not now then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local member, rid, spec, meta = ARGV[2], ARGV[3], ARGV[4], ARGV[6]
local ledger = byte(spec, 1) == 36 -- '$'
local num = { unpackd(sub('<dddddddddddddddddddddddd', 1, 1 + #ARGV[5] / 8), ARGV[5]) }
local lease = num[1]
local H = KEYS[1]
-- carried is how many settles this admission carries (a digit after the '$'):
-- each is run before the checks, as if it had come just before this call.
local carried = 0
if ledger then
  local c = byte(spec, 2)
  if c >= 48 and c <= 57 then
    carried = c - 48
  end
end
-- nf is the number of fields to read, the carried settles' holds last.
local nf = #ARGV - 6 - carried
local L, S = KEYS[#KEYS - 1], KEYS[#KEYS]
if carried > 0 then
  L, S = KEYS[#KEYS - 4], KEYS[#KEYS - 3]
end

-- One HMGET reads every field of the team hash this request needs; v[i] is the field
-- named by ARGV[6 + i]: the key's revoked flag, the member's cut-off flag, then (ledger
-- only) epoch, sweep bound, this request's hold, the member's and the team's held
-- sums and seq, then each scope's state, TPM and spend fields in spec order.
local v = call('HMGET', H, unpack(ARGV, 7, 6 + nf))

-- The carried settles, through settle_hold's field cache filled from v; v then shows
-- what they wrote. settled[i] is the ith one's reply, and finish appends them all to
-- this call's reply once what they wrote is flushed.
local settled = {}
if carried > 0 then
  for i = 1, nf do
    known[ARGV[6 + i]] = v[i]
  end
  local K = { H, L, S, KEYS[#KEYS - 2], KEYS[#KEYS - 1], KEYS[#KEYS] }
  for i = 1, carried do
    local s = ARGV[6 + nf + i]
    local cost, tokens, epoch = unpackd('<ddd', s)
    settled[i] = settle_hold(now, K, sub(s, 25), member, cost, tokens, epoch)
  end
  for i = 1, nf do
    local x = written[ARGV[6 + i]]
    if x ~= nil then
      v[i] = x
    end
  end
end
local function finish(reply)
  if carried == 0 then
    return reply
  end
  flush(H, {})
  local codes = pack(sub('<ddddddddd', 1, 1 + carried), unpack(settled))
  if type(reply) == 'string' then
    return reply .. codes
  elseif not reply.err then
    reply[1] = reply[1] .. codes
  end
  return reply
end

if v[1] then
  return finish(pack('<ddddddd', 0, REVOKED, MEMBER, 0, 0, 0, 0))
end
if v[2] then
  return finish(pack('<ddddddd', 0, CUT_OFF, MEMBER, 0, 0, 0, 0))
end

-- The verdict so far: the worst refusal (w: rank, wait, reason, scope, limit,
-- remaining, reset, retry, too large, budget remaining, budget resets at) and the
-- tightest passing rate limit.
local w
local t_scope, t_limit, t_rem, t_reset
-- hard is set by a refusal the waiting room cannot lift (a member's limit, a
-- budget); qw is the longest wait among the team's rate, TPM and concurrency
-- refusals, which it can. A slot usually comes back long before the lease that
-- bounds a concurrency refusal's wait, so that wait counts as one poll at most.
local hard, qw = false, 0
-- rsv is the refusal a backlogged member gets from a team bucket this request would
-- leave below its reserve (see the waiting room): the longest such wait, first on ties.
local rsv
-- The team's request-rate bucket as the waiting room sees it (tb_rate nil: none): its
-- tokens before this request, a request's cost, its refill a microsecond and when it
-- is full.
local tb_tokens, tb_cost, tb_rate, tb_full
-- reserve is what a team bucket of capacity cap, refilled rate units a microsecond,
-- holds back from backlogged members once it has given cost: queueReserve's refill, at
-- most half of what is left, so that a backlogged member always fits.
local function reserve(rate, cap, cost)
  local half = floor((cap - cost) / 2)
  if rate <= floor(half / RESERVE) then
    return rate * RESERVE
  end
  return half
end
local function short(left, rate, r, reason, limit, reset)
  if left < r then
    local rw = floor((r - left + rate - 1) / rate)
    if not rsv or rw > rsv[1] then
      rsv = { rw, reason, limit, reset }
    end
  end
end
-- consider keeps the worse of a refusal and the worst so far: the lower rank (budget,
-- then rate and TPM, then concurrency), then the longer wait; the first on ties.
local function consider(rank, wait, reason, scope, limit, rem, reset, retry, large, brem, bnext)
  if scope == TEAM and rank > 1 then
    local q = wait
    if rank == 3 and q > MAX_POLL then
      q = MAX_POLL
    end
    if q > qw then
      qw = q
    end
  else
    hard = true
  end
  if not w or rank < w[1] or (rank == w[1] and wait > w[2]) then
    w = { rank, wait, reason, scope, limit, rem, reset, retry, large, brem, bnext }
  end
end

-- sweep charges up to SWEEP holds whose lease ended by now, oldest first: each is
-- charged in full to its period (if that is still the one its counter counts), taken
-- off the held sums, remembered as settled, and returned as (id, hold, tokens, meta)
-- quadruples. Its tokens stay spent. It also returns the earliest lease left.
local function sweep(L, S)
  local ids = call('ZRANGEBYSCORE', L, '-inf', now, 'LIMIT', 0, SWEEP)
  local expired = {}
  if #ids > 0 then
    local fields = {}
    for i = 1, #ids do
      fields[i] = 'r:' .. ids[i]
    end
    local recs = call('HMGET', H, unpack(fields))
    -- The changes, in order, as (field, amount, period) triples: a held sum takes
    -- the hold off (period false), a spend field is charged it for its period.
    local changes, names, seen = {}, {}, {}
    local function change(field, a, p)
      changes[#changes + 1], changes[#changes + 2], changes[#changes + 3] = field, a, p
      if not seen[field] then
        seen[field], names[#names + 1] = #names + 1, field
      end
    end
    for i = 1, #ids do
      local rec = recs[i]
      if rec then
        local a, k, mk, mp, tk, tp, _, _, _, ml = unpackd('<dddddddddd', rec)
        local who = sub(rec, 81, 80 + ml)
        if a > 0 and mk > 0 then
          change('h:' .. who, -a, false)
          change(sub('odm', mk, mk) .. ':' .. who, a, mp)
        end
        if a > 0 and tk > 0 then
          change('h', -a, false)
          change(sub('odm', tk, tk), a, tp)
        end
        local e = #expired
        expired[e + 1], expired[e + 2], expired[e + 3], expired[e + 4] = ids[i], a, k, sub(rec, 81 + ml)
      end
    end
    local set = {}
    if #names > 0 then
      local cur = call('HMGET', H, unpack(names))
      -- Each field's value as it goes: a held sum, or a spend field's period and
      -- spent. A charge counts on a field on its period or an earlier one (which then
      -- starts the hold's period from zero); on a field already on a later period it
      -- is the ledger's history.
      local held, fp, spent = {}, {}, {}
      for i = 1, #names do
        local c = cur[i]
        held[i], fp[i], spent[i] = 0, -1, 0
        if c and #c == 8 then
          held[i] = unpackd('<d', c)
        elseif c then
          fp[i], spent[i] = unpackd('<dd', c)
        end
      end
      for j = 1, #changes, 3 do
        local i, a, p = seen[changes[j]], changes[j + 1], changes[j + 2]
        if not p then
          held[i] = held[i] + a
        elseif fp[i] < p then
          fp[i], spent[i] = p, a
        elseif fp[i] == p then
          spent[i] = spent[i] + a
        end
      end
      for i = 1, #names do
        set[#set + 1] = names[i]
        if fp[i] >= 0 then
          set[#set + 1] = pack('<dd', fp[i], spent[i])
        else
          set[#set + 1] = pack('<d', held[i])
        end
      end
    end
    call('HDEL', H, unpack(fields))
    call('ZREM', L, unpack(ids))
    if #set > 0 then
      call('HSET', H, unpack(set))
    end
    local done = {}
    for i = 1, #expired, 4 do
      done[#done + 1], done[#done + 2] = now, expired[i]
    end
    if #done > 0 then
      call('ZADD', S, unpack(done))
      call('PEXPIRE', S, floor((SETTLED_WINDOW + SLACK + 999) / 1000))
    end
  end
  local first = call('ZRANGE', L, 0, 0, 'WITHSCORES')
  local earliest = INF
  if first[2] then
    earliest = tonumber(first[2])
  end
  return expired, earliest
end

-- Phase 1: gather state and run every check; nothing is written but the sweep.
local fi, ki, ai = 3, 2, 2
local hold, need, fit, epoch, expired, bound, old_bound
-- seq counts the team's admissions: a replica that sees it go back knows the hash
-- is older than one it saw before (a restored snapshot, a lagging failover).
local seq = 0
local held_m, held_t = 0, 0
if ledger then
  local e = v[3]
  if not e then
    return finish(pack('<ddddddd', 0, REBUILD, 0, 0, 0, 0, 0))
  end
  epoch = unpackd('<d', e)
  if v[5] then
    return finish(redis.error_reply('HOLDEXISTS request id ' .. rid .. ' already holds a reservation'))
  end
  hold, need, fit = num[2], num[3], num[4]
  ai = 5
  -- The sweep bound is at most the earliest lease among the team's holds, so until
  -- it passes there is nothing to sweep and the leases set is not even read.
  bound = 0
  if v[4] then
    bound = unpackd('<d', v[4])
  end
  old_bound = bound
  if now >= bound then
    -- The sweep reads and writes the hash itself: it must see the settles.
    flush(H, {})
    expired, bound = sweep(L, S)
    if #expired > 0 then
      -- Read again what the sweep changed.
      v = call('HMGET', H, unpack(ARGV, 7, 6 + nf))
    else
      expired = nil
    end
  end
  if v[6] then
    held_m = unpackd('<d', v[6])
  end
  if v[7] then
    held_t = unpackd('<d', v[7])
  end
  if v[8] then
    seq = unpackd('<d', v[8])
  end
  fi = 9
end

-- ttl is the PEXPIRE (ms) for state that reads as empty after us microseconds, so an
-- idle member's keys disappear; the slack keeps a key until it is surely empty.
local function ttl(us)
  return floor((us + SLACK + 999) / 1000)
end

-- pending is the list of ZSET writes to commit, five values each: what, key, a, b, c.
-- set is the team hash's fields to write (field name, value) on commit.
local pending, np, set = {}, 0, {}
-- st is the current scope's state: { field index, tokens, ts, period, conc deadline,
-- conc bound, write? , bucket reset }. One field per scope holds its rate bucket
-- (tokens, ts, period; period 0: none) and two facts about its concurrency set: the
-- deadline its TTL runs to, so the TTL is extended only when it runs short, and an
-- upper bound on its size (entries added since it was last counted; settles do not
-- lower it), so the set is counted only when the bound reaches the cap.
local st
local states = {}
local b_before, b_scope, b_next -- the tightest budget: least remaining before this hold
local bud_m, bud_t, tpm_m, tpm_t, slots = 0, 0, 0, 0, 0 -- budget kinds, TPM rates, conc slots
local periods = { 0, 0, 0 } -- the current period index of each budget kind, once needed
local nexts = { 0, 0, 0 }
local scope = MEMBER
local first, last = 1, #spec
if ledger then
  first = 2
  if carried > 0 then
    first = 3
  end
end
local queue = byte(spec, last) == 126 -- '~': the request may wait in the room
if queue then
  last = last - 1
end
for i = first, last do
  local op = byte(spec, i)
  if op < 97 then -- upper case: the team's limits
    if scope == MEMBER then
      scope, st = TEAM, nil
    end
    op = op + 32
  end
  if not st and (op == 98 or op == 99) then
    local s = v[fi]
    if s then
      st = { fi, unpackd('<ddddd', s) }
    else
      st = { fi, 0, 0, 0, 0, 0 }
    end
    st[7], st[8] = false, 0
    states[#states + 1] = st
    fi = fi + 1
  end
  if op == 98 then
    -- 'b': token bucket in scaled units. One token is `period` units and the bucket
    -- refills `limit` units per microsecond, so refills are whole numbers with no
    -- drift. State: tokens, ts and period in the scope's state field (period 0: none).
    local limit, period, burst = num[ai], num[ai + 1], num[ai + 2]
    local cap = burst * period
    local tokens, ts = cap, now
    local was = st[4]
    if was > 0 then
      tokens, ts = st[2], st[3]
      if was ~= period then
        -- The period changed: keep the whole tokens, in the new units.
        tokens = min(floor(tokens / was), burst) * period
      end
      if tokens > cap then
        tokens = cap
      end
    end
    -- A clock that steps back refills nothing, and ts never moves back. The product
    -- is compared in floating point, which is exact here: below 2^53 it is the
    -- integer, above it rounds to a value no smaller than cap - tokens.
    if now > ts then
      if (now - ts) * limit >= cap - tokens then
        tokens = cap
      else
        tokens = tokens + (now - ts) * limit
      end
      ts = now
    end
    local full = floor((cap - tokens + limit - 1) / limit)
    if queue and scope == TEAM then
      tb_tokens, tb_cost, tb_rate, tb_full = tokens, period, limit, full
    end
    if tokens < period then
      local retry = floor((period - tokens + limit - 1) / limit)
      consider(2, retry, RATE, scope, limit, 0, full, retry, 0)
    else
      local left = tokens - period
      local rem, reset = floor(left / period), floor((cap - left + limit - 1) / limit)
      if not t_rem or rem < t_rem then
        t_scope, t_limit, t_rem, t_reset = scope, limit, rem, reset
      end
      st[2], st[3], st[4], st[7], st[8] = left, ts, period, true, reset
      if queue and scope == TEAM then
        short(left, limit, reserve(limit, cap, period), RATE, limit, full)
      end
    end
    ai = ai + 3
  elseif op == 99 then
    -- 'c': concurrency slots, member = request id, score = lease expiry; a slot is
    -- held while score > now, so a crashed gateway's slot returns when its lease
    -- ends. A bound on the entries (expired ones included) below the cap admits at
    -- once; only then is the set counted, and only a full set needs the live count.
    -- The set also holds a sentinel, "" at -inf, so that settles never empty it
    -- (which would drop its TTL); it is never counted as live.
    local cap, key = num[ai], KEYS[ki]
    local card = st[6]
    local active = card
    if card >= cap then
      card = call('ZCARD', key)
      if card > 0 then
        card = card - 1
      end
      active = card
      if card >= cap then
        active = call('ZCOUNT', key, '(' .. format('%d', now), '+inf')
      end
    end
    if active >= cap then
      local e = call('ZRANGEBYSCORE', key, '(' .. format('%d', now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
      local retry = min(tonumber(e[2]) - now, CONC_RETRY_CAP)
      consider(3, retry, CONCURRENCY, scope, cap, 0, retry, retry, 0)
    else
      pending[np + 1], pending[np + 2], pending[np + 3], pending[np + 4], pending[np + 5] = 3, key, card, card - active, st
      np = np + 5
      slots = slots + scope
    end
    ai, ki = ai + 1, ki + 1
  elseif op == 119 then
    -- 'w': sliding window log, one entry per admitted request, member = request id
    -- (unique, so two requests in the same microsecond stay two), score = admission
    -- time. An entry counts while score > now - period.
    local limit, period, key = num[ai], num[ai + 1], KEYS[ki]
    local from = '(' .. format('%d', now - period)
    local count = call('ZCOUNT', key, from, '+inf')
    local newest = now
    if count > 0 then
      newest = tonumber(call('ZREVRANGEBYSCORE', key, '+inf', from, 'WITHSCORES', 'LIMIT', 0, 1)[2])
    end
    if count >= limit then
      -- Admitted once every entry up to this one has left the window.
      local e = call('ZRANGEBYSCORE', key, from, '+inf', 'WITHSCORES', 'LIMIT', count - limit, 1)
      local retry = tonumber(e[2]) + period - now
      consider(2, retry, RATE, scope, limit, 0, newest + period - now, retry, 0)
    else
      local rem, reset = limit - count - 1, newest + period - now
      if now > newest then
        reset = period
      end
      if not t_rem or rem < t_rem then
        t_scope, t_limit, t_rem, t_reset = scope, limit, rem, reset
      end
      pending[np + 1], pending[np + 2], pending[np + 3], pending[np + 4] = 2, key, period, ttl(reset)
      np = np + 5
    end
    ai, ki = ai + 2, ki + 1
  elseif op == 116 then
    -- 't': TPM bucket of capacity rate tokens, refilled rate tokens per minute; one
    -- token is UNIT units and the bucket refills rate units per microsecond. It may
    -- hold a debt (below zero) after a settle used more than it reserved, and refuses
    -- until that is repaid. State: tokens, ts, rate packed as three doubles.
    local rate = num[ai]
    local cap = rate * UNIT
    local tokens, ts = cap, now
    local s = v[fi]
    if s then
      tokens, ts = unpackd('<dd', s)
      if tokens > cap then
        tokens = cap
      end
    end
    if now > ts then
      if (now - ts) * rate >= cap - tokens then
        tokens = cap
      else
        tokens = tokens + (now - ts) * rate
      end
      ts = now
    end
    local rem = 0
    if tokens > 0 then
      rem = floor(tokens / UNIT)
    end
    local want = need * UNIT
    if need > rate then
      consider(2, INF, TPM, scope, rate, rem, floor((cap - tokens + rate - 1) / rate), 0, 1)
    elseif tokens < want then
      local retry = floor((want - tokens + rate - 1) / rate)
      consider(2, retry, TPM, scope, rate, rem, floor((cap - tokens + rate - 1) / rate), retry, 0)
    else
      if need > 0 then
        set[#set + 1], set[#set + 2] = ARGV[6 + fi], pack('<ddd', tokens - want, ts, rate)
      end
      if queue and scope == TEAM then
        short(tokens - want, rate, reserve(rate, cap, want), TPM, rate, floor((cap - tokens + rate - 1) / rate))
      end
      if scope == MEMBER then
        tpm_m = rate
      else
        tpm_t = rate
      end
    end
    ai, fi = ai + 1, fi + 1
  else
    -- 'o', 'd', 'm': a budget, total, daily or monthly: spent in the current period
    -- + held + this hold must stay within the limit. The spend field holds its
    -- period and what was spent in it; a field on an earlier period counts zero.
    local kind = 1
    if op == 100 then
      kind = 2
    elseif op == 109 then
      kind = 3
    end
    local limit = num[ai]
    if kind > 1 and periods[kind] == 0 then
      periods[kind], nexts[kind] = period_at(kind, now)
    end
    local spent = 0
    local s = v[fi]
    if s then
      local p, x = unpackd('<dd', s)
      if p == periods[kind] then
        spent = x
      end
    end
    local before
    if scope == MEMBER then
      before = limit - spent - held_m
      bud_m = kind
    else
      before = limit - spent - held_t
      bud_t = kind
    end
    if not b_before or before < b_before then
      b_before, b_scope, b_next = before, scope, nexts[kind]
    end
    local brem = before
    if brem < 0 then
      brem = 0
    end
    -- With a fit floor, a budget refuses only when not even the floor fits.
    local h = hold
    if fit > 0 then
      h = fit
    end
    if h > limit then
      consider(1, INF, BUDGET, scope, 0, 0, 0, 0, 1, brem, nexts[kind])
    elseif before < h then
      consider(1, 0, BUDGET, scope, 0, 0, 0, 0, 0, brem, nexts[kind])
    end
    ai, fi = ai + 1, fi + 1
  end
end

-- A request with a fit floor that every budget passed at the floor is held what the
-- tightest budget has left, if that is less than its hold (local_ledger.go's fit).
local fitted = 0
if ledger and fit > 0 and b_before and b_before < hold and b_before >= fit then
  hold, fitted = b_before, b_before
end

-- The waiting room: start-time fair queueing on a virtual clock. Past this point
-- only if the room has waiters, this request holds a ticket, or the team's limits
-- alone refused it within its wait; an idle room costs nothing more.
if queue then
  local step, maxwait, queued = num[ai], num[ai + 1], num[ai + 2] == 1
  local Q, wf, tf = KEYS[ki], ARGV[6 + fi], 't:' .. rid
  local V, N, g = 0, 0, 0
  if v[fi] then
    V, N, g = unpackd('<ddd', v[fi])
  end
  local mine = queued and v[fi + 1]
  if N > 0 or mine or (w and not hard and qw <= maxwait) then
    local V0, N0 = V, N
    -- Drop tickets at the head whose lease ended (their caller's replica died),
    -- at most SWEEP, until the head is alive or is this request's own.
    local head, hs
    local dropped = 0
    while N > 0 and dropped < SWEEP do
      local h = call('ZRANGE', Q, 0, 0, 'WITHSCORES')
      if not h[1] then
        N = 0
        break
      end
      local rec
      if not (mine and h[1] == rid) then
        rec = call('HGET', H, 't:' .. h[1])
      end
      if (mine and h[1] == rid) or (rec and unpackd('<d', rec) > now) then
        head, hs = h[1], tonumber(h[2])
        break
      end
      call('ZREM', Q, h[1])
      if rec then
        call('HDEL', H, 't:' .. h[1])
      end
      N, dropped = N - 1, dropped + 1
    end
    -- The member's last finish tag. A member more than BACKLOG of its own steps
    -- ahead of the virtual clock is backlogged: it may not take a team bucket's
    -- reserve. Any other member asks for no more than its share: if its start tag
    -- is no later than the head's (a tie goes to whoever asks when the limits
    -- pass) and the limits pass, it is admitted at once, without a ticket, and its
    -- finish tag does not move, so a runaway loop that keeps the room full cannot
    -- make it wait for tokens.
    local F = 0
    local fs = call('HGET', H, 'f:' .. member)
    if fs then
      local f, fg = unpackd('<dd', fs)
      if fg == g then
        F = f
      end
    end
    local backlogged = N > 0 and F - V > BACKLOG * step
    if backlogged and rsv and not w then
      consider(2, rsv[1], rsv[2], TEAM, rsv[3], 0, rsv[4], rsv[1], 0)
    end
    local S = V
    if F > S then
      S = F
    end
    -- out: 1 admit, 2 refuse, 3 wait with the ticket held, 4 take a ticket.
    local out, leave = 2, false
    if hard then
      leave = mine
    elseif mine then
      if head == rid and not w then
        out, leave, V = 1, true, hs
      elseif qw > maxwait then
        leave = true
      else
        out = 3
      end
    elseif not w and N == 0 then
      out = 1
    elseif not w and head and not backlogged and S <= hs then
      out, V = 1, S
    elseif qw <= maxwait then
      out = 4
      -- The tickets with earlier start tags are served first, each with a token of
      -- the team's request-rate bucket: a request that could not be served within
      -- its wait even if they took every token is refused now, with that wait, not
      -- when its wait runs out (a runaway loop's requests would fill the room).
      if tb_rate then
        local need = (call('ZCOUNT', Q, '-inf', format('(%.0f', S)) + 1) * tb_cost - tb_tokens
        local soonest = floor((need + tb_rate - 1) / tb_rate)
        if soonest > maxwait then
          out = 2
          consider(2, soonest, RATE, TEAM, tb_rate, 0, tb_full, soonest, 0)
        end
      end
    end
    if leave then
      call('ZREM', Q, rid)
      call('HDEL', H, tf)
      N = N - 1
    end
    local qset = {}
    if out == 4 then
      -- The ticket's start tag: the virtual time, or the member's last finish tag
      -- if later; the member's finish tag moves on by the ticket's step.
      if N == 0 and V >= REBASE then
        V, g, S = 0, g + 1, 0
      end
      call('ZADD', Q, S, rid)
      qset[1], qset[2] = 'f:' .. member, pack('<dd', S + step, g)
      N = N + 1
    end
    if out >= 3 then
      local pos = 0
      if head ~= rid then
        pos = call('ZRANK', Q, rid)
      end
      local poll = qw
      if poll < MIN_POLL then
        poll = MIN_POLL
      end
      poll = min(MAX_POLL, poll * (pos + 1))
      qset[#qset + 1], qset[#qset + 2] = tf, pack('<d', now + poll + GRACE)
      w = { 2, poll, QUEUED, TEAM, N, pos, 0, poll, 0 }
    end
    if V ~= V0 or N ~= N0 then
      qset[#qset + 1], qset[#qset + 2] = wf, pack('<ddd', V, N, g)
    end
    if out == 1 then
      for j = 1, #qset do
        set[#set + 1] = qset[j]
      end
    elseif #qset > 0 then
      call('HSET', H, unpack(qset))
    end
  end
end

-- ledger_reply packs a ledger reply: the seven common numbers, then too large, budget
-- remaining, budget scope, budget resets at, the hold's epoch, the number of expired
-- holds, the team's epoch and seq before this call, now, the hold fit placed (0 none),
-- then each expired hold's hold and tokens; with expired holds, a table of it and each
-- one's request id and meta.
local function ledger_reply(r, large, brem, bscope, bnext, ep, placed)
  local n = 0
  if expired then
    n = #expired / 4
  end
  local packed = pack('<ddddddddddddddddd', r[1], r[2], r[3], r[4], r[5], r[6], r[7], large, brem, bscope, bnext, ep, n,
    epoch, seq, now, placed or 0)
  if n == 0 then
    return packed
  end
  local out, amounts = { 0 }, { packed }
  for i = 1, #expired, 4 do
    out[#out + 1], out[#out + 2] = expired[i], expired[i + 3]
    amounts[#amounts + 1] = pack('<dd', expired[i + 1], expired[i + 2])
  end
  out[1] = table.concat(amounts)
  return out
end

-- Phase 2: the verdict.
if w then
  local r = { 0, w[3], w[4], w[5], w[6], w[7], w[8] }
  if not ledger then
    return finish(pack('<ddddddd', r[1], r[2], r[3], r[4], r[5], r[6], r[7]))
  end
  if expired then
    -- What the sweep did stands whatever the verdict, its bound too.
    call('HSET', H, 'x', pack('<d', bound))
  end
  if w[3] == BUDGET then
    return finish(ledger_reply(r, w[9], w[10], w[4], w[11], 0))
  end
  if b_before then
    local brem = b_before
    if brem < 0 then
      brem = 0
    end
    return finish(ledger_reply(r, w[9], brem, b_scope, b_next, 0))
  end
  return finish(ledger_reply(r, w[9], -1, 0, 0, 0))
end

-- Phase 3: every check passed; commit every reservation.
for j = 1, np, 5 do
  local what, key, a, b = pending[j], pending[j + 1], pending[j + 2], pending[j + 3]
  if what == 2 then -- a window entry
    call('ZADD', key, now, rid)
    call('ZREMRANGEBYSCORE', key, '-inf', now - a)
    call('PEXPIRE', key, b)
  else -- a concurrency slot; a = the bound on entries, b = expired ones (when counted)
    -- Expired leases sort first after the sentinel; sweep at most 100 per call so
    -- that one call after a mass crash stays short. Counting ignores them anyway, and
    -- they are swept once the set fills up, so it holds at most cap + 101 entries.
    b = min(b, 100)
    if b > 0 then
      call('ZREMRANGEBYRANK', key, 1, b)
    end
    call('ZADD', key, now + lease, rid, '-inf', '')
    local s = pending[j + 4]
    s[6], s[7] = a - b + 1, true
    -- The set's TTL must outlast this lease; a set that expired or is new has a
    -- deadline already past.
    if s[5] < now + lease then
      s[5] = now + lease + EXTEND
      call('PEXPIRE', key, ttl(lease + EXTEND))
    end
  end
end
for j = 1, #states do
  local s = states[j]
  if s[7] then
    set[#set + 1], set[#set + 2] = ARGV[6 + s[1]], pack('<ddddd', s[2], s[3], s[4], s[5], s[6])
  end
end

local r = { 1, 0, 0, 0, 0, 0, 0 }
if t_rem then
  r[3], r[4], r[5], r[6] = t_scope, t_limit, t_rem, t_reset
end
if not ledger then
  if #set > 0 then
    call('HSET', H, unpack(set))
  end
  return finish(pack('<ddddddd', r[1], r[2], r[3], r[4], r[5], r[6], r[7]))
end
local ep = 0
if (hold > 0 and (bud_m > 0 or bud_t > 0)) or (need > 0 and (tpm_m > 0 or tpm_t > 0)) then
  -- Store the hold: amount, tokens, the budget kinds and periods it counts against,
  -- the TPM rates of the buckets it reserved from, its concurrency slots (1 member,
  -- 2 team, 3 both), the member's length, then the member and the meta.
  local mp, tp = 0, 0
  if bud_m > 0 then
    mp = periods[bud_m]
  end
  if bud_t > 0 then
    tp = periods[bud_t]
  end
  local n = #set
  set[n + 1], set[n + 2] = ARGV[6 + 5],
    pack('<dddddddddd', hold, need, bud_m, mp, bud_t, tp, tpm_m, tpm_t, slots, #member) .. member .. meta
  n = n + 2
  if hold > 0 and bud_m > 0 then
    set[n + 1], set[n + 2], n = ARGV[6 + 6], pack('<d', held_m + hold), n + 2
  end
  if hold > 0 and bud_t > 0 then
    set[n + 1], set[n + 2], n = ARGV[6 + 7], pack('<d', held_t + hold), n + 2
  end
  if now + lease < bound then
    bound = now + lease
  end
  call('ZADD', L, now + lease, rid)
  ep = epoch
end
if bound ~= old_bound then
  set[#set + 1], set[#set + 2] = 'x', pack('<d', bound)
end
set[#set + 1], set[#set + 2] = 'n', pack('<d', seq + 1)
flush(H, set)
if b_before then
  return finish(ledger_reply(r, 0, b_before - hold, b_scope, b_next, ep, fitted))
end
return finish(ledger_reply(r, 0, -1, 0, 0, ep, fitted))
