-- ADMIT: the whole admission decision for one request, atomically.
-- KEYS, ARGV and the reply are laid out in redis.go (admitScript); local.go is the same
-- logic in Go, step for step.
--
-- Three phases, so that a refusal writes nothing: gather state and run every check
-- read-only, pick the verdict, and only if every check passed commit every reservation.
-- The one exception is the sweep of expired holds (ledger requests only), which runs
-- whatever the verdict: it corrects state any call would correct, and a team that is
-- refused must still get its abandoned holds back.
--
-- The script is written flat for speed: it runs on every request, and what it costs
-- is redis.call round trips inside Redis (about a microsecond each), Lua closures,
-- tables and string formatting. So only the limits that apply are sent (a spec
-- string, see redis.go), every string key is read by one MGET, each check runs inline
-- in one loop over the spec, and the only tables are Redis's replies, the list of
-- pending writes and the reply.
--
-- Lua 5.1 numbers are doubles, exact only for integers below 2^53. Every value here is
-- such an integer, and integers above 10^14 reach Redis through format('%d') rather
-- than Lua's lossy %.14g conversion. Division is exact too: for integers with a + b <
-- 2^53, the correctly rounded a / b cannot reach the next integer, so floor(a / b) is
-- the integer quotient; Policy.Validate bounds every dividend here accordingly.

local call, min, byte, sub, format, match, unpack, pack, unpackd =
  redis.call, math.min, string.byte, string.sub, string.format, string.match, unpack, struct.pack, struct.unpack

-- Constants shared with Go (limiter.go, redis.go): ttlSlack, concurrencyRetryCap,
-- sweepBatch, tokenUnit, SettledWindow.
local SLACK, CONC_RETRY_CAP, SWEEP, UNIT, SETTLED_WINDOW = 10000000, 1000000, 100, 60000000, 120000000
-- A concurrency set's TTL is extended this far past the lease it needs, so that the
-- extension (a PEXPIRE) runs about once per EXTEND rather than on every request.
local EXTEND = 30000000
local INF = 9007199254740992
-- Reasons and scopes as the reply numbers them.
local RATE, CONCURRENCY, REVOKED, CUT_OFF, BUDGET, TPM, REBUILD = 1, 2, 3, 4, 5, 6, 7
local MEMBER, TEAM = 1, 2

local now = tonumber(ARGV[1])
if not now then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local member, rid, spec = ARGV[2], ARGV[3], ARGV[4]
local ledger = byte(spec, 1) == 36 -- '$'
-- Every number comes packed as little-endian doubles in ARGV[5]: one struct.unpack
-- instead of a tonumber per argument.
local num = { unpackd(sub('<dddddddddddddddddddddddd', 1, 1 + #ARGV[5] / 8), ARGV[5]) }
local lease = num[1]

-- One MGET reads every string key: the revoked and cut-off flags, the marker (ledger
-- only), then the rate and TPM buckets in spec order.
local nstr = num[2]
local str = call('MGET', unpack(KEYS, 1, nstr))
if str[1] then
  return { 0, REVOKED, MEMBER, 0, 0, 0, 0 }
end
if str[2] then
  return { 0, CUT_OFF, MEMBER, 0, 0, 0, 0 }
end

-- ttl is the PEXPIRE (ms) for state that reads as empty after us microseconds, so an
-- idle member's keys disappear; the slack keeps a key until it is surely empty.
local function ttl(us)
  return floor((us + SLACK + 999) / 1000)
end

-- The verdict so far: the worst refusal (w: rank, wait, reason, scope, limit,
-- remaining, reset, retry, too large, budget remaining, budget resets at) and the
-- tightest passing rate limit.
local w
local t_scope, t_limit, t_rem, t_reset
-- consider keeps the worse of a refusal and the worst so far: the lower rank (budget,
-- then rate and TPM, then concurrency), then the longer wait; the first on ties.
local function consider(rank, wait, reason, scope, limit, rem, reset, retry, large, brem, bnext)
  if not w or rank < w[1] or (rank == w[1] and wait > w[2]) then
    w = { rank, wait, reason, scope, limit, rem, reset, retry, large, brem, bnext }
  end
end

-- Phase 1: gather state and run every check; nothing is written but the sweep.
local si, ki, ai = 3, nstr + 1, 3
local hold, need, meta, epoch, expired, holds_deadline
local k_holds, k_leases, k_settled, k_spend
local held_m, held_t = 0, 0
if ledger then
  epoch = tonumber(str[3])
  if not epoch or epoch == 0 then
    return { 0, REBUILD, 0, 0, 0, 0, 0 }
  end
  si = 4
  hold, need, meta = num[3], num[4], ARGV[6]
  ai = 5
  local n = #KEYS
  k_holds, k_leases, k_settled, k_spend = KEYS[n - 5], KEYS[n - 4], KEYS[n - 3], n - 3
  local h = call('HMGET', k_holds, 'hm:' .. member, 'ht', 'r:' .. rid, 'd')
  if h[3] then
    return redis.error_reply('HOLDEXISTS request id ' .. rid .. ' already holds a reservation')
  end
  held_m, held_t = tonumber(h[1]) or 0, tonumber(h[2]) or 0
  -- d is how far the TTL of holds and leases runs (see the commit); neither key ever
  -- empties (the held sums stay in holds, a sentinel "" at +inf in leases), so the
  -- TTL is extended only when d runs short.
  holds_deadline = tonumber(h[4]) or 0

  local nows = format('%d', now)
  -- Sweep expired holds, oldest first: charge each in full to its period (if that is
  -- still the current one), take it off the held sums, remember it as settled, and
  -- report it. Its tokens stay spent.
  local ids = call('ZRANGEBYSCORE', k_leases, '-inf', nows, 'LIMIT', 0, SWEEP)
  if #ids > 0 then
    local fields = {}
    for i = 1, #ids do
      fields[i] = 'r:' .. ids[i]
    end
    local recs = call('HMGET', k_holds, unpack(fields))
    local held, charges, done = {}, { {}, {}, {} }, {}
    expired = {}
    for i = 1, #ids do
      local rec = recs[i]
      if rec then
        local a, k, mk, mp, tk, tp, _, _, ml, pos =
          match(rec, '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) ()')
        a, mk, tk, ml = tonumber(a), tonumber(mk), tonumber(tk), tonumber(ml)
        local who = sub(rec, pos, pos + ml - 1)
        if mk > 0 then
          held['hm:' .. who] = (held['hm:' .. who] or 0) + a
          local c = charges[mk]
          c[#c + 1] = tonumber(mp)
          c[#c + 1] = 'm:' .. who
          c[#c + 1] = a
        end
        if tk > 0 then
          held.ht = (held.ht or 0) + a
          local c = charges[tk]
          c[#c + 1] = tonumber(tp)
          c[#c + 1] = 't'
          c[#c + 1] = a
        end
        local e = #expired
        expired[e + 1], expired[e + 2], expired[e + 3], expired[e + 4] = ids[i], a, tonumber(k), sub(rec, pos + ml)
        done[#done + 1] = nows
        done[#done + 1] = ids[i]
      end
    end
    call('HDEL', k_holds, unpack(fields))
    call('ZREM', k_leases, unpack(ids))
    for field, a in pairs(held) do
      if a > 0 then
        call('HINCRBY', k_holds, field, format('%d', -a))
      end
    end
    held_m = held_m - (held['hm:' .. member] or 0)
    held_t = held_t - (held.ht or 0)
    for kind = 1, 3 do
      local c = charges[kind]
      if #c > 0 then
        local key = KEYS[k_spend + kind]
        local cur = 0
        if kind > 1 then
          cur = tonumber(call('HGET', key, 'p'))
        end
        local sum = {}
        for j = 1, #c, 3 do
          if c[j] == cur then
            sum[c[j + 1]] = (sum[c[j + 1]] or 0) + c[j + 2]
          end
        end
        for field, a in pairs(sum) do
          if a > 0 then
            call('HINCRBY', key, field, format('%d', a))
          end
        end
      end
    end
    if #done > 0 then
      call('ZADD', k_settled, unpack(done))
      -- Extend the TTL, never shorten it: GT fails on a new key, which NX then sets.
      if call('PEXPIRE', k_settled, ttl(SETTLED_WINDOW), 'GT') == 0 then
        call('PEXPIRE', k_settled, ttl(SETTLED_WINDOW), 'NX')
      end
    end
  end
end

-- pending is the list of writes to commit, five values each: what, key, a, b, c.
-- states are the scopes' state strings, written last.
local pending, np, states = {}, 0, {}
-- st is the current scope's state string: { key, tokens, ts, period, conc deadline,
-- conc bound, write?, bucket reset }. One string per scope, read by the one MGET,
-- holds its rate bucket (tokens, ts, period; period 0: none) and two facts about its
-- concurrency set: the deadline its TTL runs to, so the TTL is extended only when it
-- runs short, and an upper bound on its size (entries added since it was last
-- counted; settles do not lower it), so the set is counted only when the bound
-- reaches the cap. The string never expires before the set does (same clock, TTL at
-- least as long), so the bound is never lost while the set lives.
local st
local b_before, b_scope, b_next -- the tightest budget: least remaining before this hold
local bud_m, bud_t, tpm_m, tpm_t = 0, 0, 0, 0 -- budget kinds and TPM rates reserved from
local spend -- kind → { current index, next start, member's spent, team's spent, stored index }
if ledger then
  spend = {}
end
local scope = MEMBER
local first = 1
if ledger then
  first = 2
end
for i = first, #spec do
  local op = byte(spec, i)
  if op < 97 then -- upper case: the team's limits
    if scope == MEMBER then
      scope, st = TEAM, nil
    end
    op = op + 32
  end
  if not st and (op == 98 or op == 99) then
    local v = str[si]
    if v then
      st = { KEYS[si], unpackd('<ddddd', v) }
    else
      st = { KEYS[si], 0, 0, 0, 0, 0 }
    end
    st[7], st[8] = false, 0
    states[#states + 1] = st
    si = si + 1
  end
  if op == 98 then
    -- 'b': token bucket in scaled units. One token is `period` units and the bucket
    -- refills `limit` units per microsecond, so refills are whole numbers with no
    -- drift. State: tokens, ts and period in the scope's state string (period 0: none).
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
    if tokens < period then
      local retry = floor((period - tokens + limit - 1) / limit)
      consider(2, retry, RATE, scope, limit, 0, floor((cap - tokens + limit - 1) / limit), retry, 0)
    else
      local left = tokens - period
      local rem, reset = floor(left / period), floor((cap - left + limit - 1) / limit)
      if not t_rem or rem < t_rem then
        t_scope, t_limit, t_rem, t_reset = scope, limit, rem, reset
      end
      st[2], st[3], st[4], st[7], st[8] = left, ts, period, true, reset
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
    local st = str[si]
    if st then
      tokens, ts = unpackd('<dd', st)
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
        local left = tokens - want
        pending[np + 1], pending[np + 2], pending[np + 3], pending[np + 4] =
          1, KEYS[si], pack('<ddd', left, ts, rate), ttl(floor((cap - left + rate - 1) / rate))
        np = np + 5
      end
      if scope == MEMBER then
        tpm_m = rate
      else
        tpm_t = rate
      end
    end
    ai, si = ai + 1, si + 1
  else
    -- 'o', 'd', 'm': a budget, total, daily or monthly: spent in the current period
    -- + held + this hold must stay within the limit.
    local kind = 1
    if op == 100 then
      kind = 2
    elseif op == 109 then
      kind = 3
    end
    local limit = num[ai]
    local s = spend[kind]
    if not s then
      local idx, nxt = period_at(kind, now)
      local v = call('HMGET', KEYS[k_spend + kind], 'p', 'm:' .. member, 't')
      local stored = tonumber(v[1]) or 0
      s = { idx, nxt, 0, 0, stored }
      if kind == 1 or (v[1] and stored == idx) then
        s[3], s[4] = tonumber(v[2]) or 0, tonumber(v[3]) or 0
      end
      spend[kind] = s
    end
    local before
    if scope == MEMBER then
      before = limit - s[3] - held_m
      bud_m = kind
    else
      before = limit - s[4] - held_t
      bud_t = kind
    end
    if not b_before or before < b_before then
      b_before, b_scope, b_next = before, scope, s[2]
    end
    local brem = before
    if brem < 0 then
      brem = 0
    end
    if hold > limit then
      consider(1, INF, BUDGET, scope, 0, 0, 0, 0, 1, brem, s[2])
    elseif before < hold then
      consider(1, 0, BUDGET, scope, 0, 0, 0, 0, 0, brem, s[2])
    end
    ai = ai + 1
  end
end

-- ledger_reply appends the ledger fields to a reply.
local function ledger_reply(r, large, brem, bscope, bnext, ep)
  r[8], r[9], r[10], r[11], r[12], r[13] = large, brem, bscope, bnext, ep, 0
  if expired then
    r[13] = #expired / 4
    for i = 1, #expired do
      r[13 + i] = expired[i]
    end
  end
  return r
end

-- Phase 2: the verdict.
if w then
  local r = { 0, w[3], w[4], w[5], w[6], w[7], w[8] }
  if not ledger then
    return r
  end
  if w[3] == BUDGET then
    return ledger_reply(r, w[9], w[10], w[4], w[11], 0)
  end
  if b_before then
    local brem = b_before
    if brem < 0 then
      brem = 0
    end
    return ledger_reply(r, w[9], brem, b_scope, b_next, 0)
  end
  return ledger_reply(r, w[9], -1, 0, 0, 0)
end

-- Phase 3: every check passed; commit every reservation.
for j = 1, np, 5 do
  local what, key, a, b = pending[j], pending[j + 1], pending[j + 2], pending[j + 3]
  if what == 1 then -- a TPM bucket's new state
    call('SET', key, a, 'PX', b)
  elseif what == 2 then -- a window entry
    call('ZADD', key, format('%d', now), rid)
    call('ZREMRANGEBYSCORE', key, '-inf', format('%d', now - a))
    call('PEXPIRE', key, b)
  else -- a concurrency slot; a = the bound on entries, b = expired ones (when counted)
    -- Expired leases sort first after the sentinel; sweep at most 100 per call so
    -- that one call after a mass crash stays short. Counting ignores them anyway, and
    -- they are swept once the set fills up, so it holds at most cap + 101 entries.
    b = min(b, 100)
    if b > 0 then
      call('ZREMRANGEBYRANK', key, 1, b)
    end
    call('ZADD', key, format('%d', now + lease), rid, '-inf', '')
    local s = pending[j + 4]
    s[6], s[7] = a - b + 1, true
    -- The set's TTL must outlast this lease; a set that expired or is new has a
    -- deadline already past (the string lives at least as long as the set).
    if s[5] < now + lease then
      s[5] = now + lease + EXTEND
      call('PEXPIRE', key, ttl(lease + EXTEND))
    end
  end
end
for j = 1, #states do
  local s = states[j]
  if s[7] then
    local us = s[5] - now
    if s[8] > us then
      us = s[8]
    end
    call('SET', s[1], pack('<ddddd', s[2], s[3], s[4], s[5], s[6]), 'PX', ttl(us))
  end
end

local r = { 1, 0, 0, 0, 0, 0, 0 }
if t_rem then
  r[3], r[4], r[5], r[6] = t_scope, t_limit, t_rem, t_reset
end
if not ledger then
  return r
end
local ep = 0
if (hold > 0 and (bud_m > 0 or bud_t > 0)) or (need > 0 and (tpm_m > 0 or tpm_t > 0)) then
  -- Store the hold: amount, tokens, the budget periods it counts against, the TPM
  -- buckets it reserved from, then the member (length-prefixed) and the meta.
  local mp, tp = 0, 0
  if bud_m > 0 then
    mp = spend[bud_m][1]
  end
  if bud_t > 0 then
    tp = spend[bud_t][1]
  end
  local rec = format('%d %d %d %d %d %d %d %d %d ', hold, need, bud_m, mp, bud_t, tp, tpm_m, tpm_t, #member)
    .. member .. meta
  local fields, nf = { 'r:' .. rid, rec }, 2
  if hold > 0 and bud_m > 0 then
    fields[nf + 1], fields[nf + 2], nf = 'hm:' .. member, format('%d', held_m + hold), nf + 2
  end
  if hold > 0 and bud_t > 0 then
    fields[nf + 1], fields[nf + 2], nf = 'ht', format('%d', held_t + hold), nf + 2
  end
  local extend = holds_deadline < now + lease
  if extend then
    fields[nf + 1], fields[nf + 2] = 'd', format('%d', now + lease + EXTEND)
  end
  call('HSET', k_holds, unpack(fields))
  call('ZADD', k_leases, format('%d', now + lease), rid, '+inf', '')
  if extend then
    call('PEXPIRE', k_holds, ttl(lease + EXTEND))
    call('PEXPIRE', k_leases, ttl(lease + EXTEND))
  end
  -- A period counter still on an earlier period starts the current one, empty.
  for kind = 2, 3 do
    local s = spend[kind]
    if s and (kind == bud_m or kind == bud_t) and s[5] ~= s[1] then
      local key = KEYS[k_spend + kind]
      call('DEL', key)
      call('HSET', key, 'p', s[1])
      call('PEXPIRE', key, ttl(s[2] - now))
    end
  end
  ep = epoch
end
if b_before then
  return ledger_reply(r, 0, b_before - hold, b_scope, b_next, ep)
end
return ledger_reply(r, 0, -1, 0, 0, ep)
