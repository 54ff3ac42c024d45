-- settle_hold: replace one request's hold with what it really cost, and free its
-- concurrency slots. Shared by SETTLE (settle.lua) and ADMIT (admit.lua), which
-- runs the settles a member's admission carries ahead of its checks; local.go's
-- Settle is the same logic in Go. period.lua is prepended.
--
-- It reads and writes the team hash through a field cache, so that ADMIT reads
-- what its settles need in its own HMGET and writes what they change in its own
-- HSET: known[f] is field f as Redis holds it (false: missing), once read;
-- written[f] is what is to be written (false: deleted). flush writes it.
--
-- Only the hold stored under this request id is ever touched: a settle for id X
-- cannot reach id Y's hold, and once X's hold is gone a replay finds nothing to undo.

local known, written = {}, {}

-- fetch reads into known the fields of names it has not read yet, in one HMGET.
local function fetch(H, names)
  local want = {}
  for i = 1, #names do
    if known[names[i]] == nil then
      want[#want + 1] = names[i]
    end
  end
  if #want > 0 then
    local got = redis.call('HMGET', H, unpack(want))
    for i = 1, #want do
      known[want[i]] = got[i]
    end
  end
end

-- field is field f's value as the script sees it, nil when it is missing.
local function field(f)
  local x = written[f]
  if x == nil then
    x = known[f]
  end
  return x or nil
end

-- flush writes what was written, with set (field, value pairs) on top: a field in
-- set is written with set's value.
local function flush(H, set)
  if next(written) ~= nil then
    for j = 1, #set, 2 do
      written[set[j]] = set[j + 1]
    end
    local del = {}
    set = {}
    for f, x in pairs(written) do
      if x then
        set[#set + 1] = f
        set[#set + 1] = x
      else
        del[#del + 1] = f
      end
    end
    written = {}
    if #del > 0 then
      redis.call('HDEL', H, unpack(del))
    end
  end
  if #set > 0 then
    redis.call('HSET', H, unpack(set))
  end
end

-- settle_hold settles request rid of member: it cost cost and used tokens, and its
-- hold was placed in generation epoch (0: none). K is the keys: h, leases, settled,
-- member conc, team conc, counted. The reply: applied + 2 × known + 4 × lost.
local function settle_hold(now, K, rid, member, cost, tokens, epoch)
  -- Shared with Go: ttlSlack, tokenUnit, SettledWindow, maxDebt.
  local SLACK, UNIT, SETTLED_WINDOW, MAX_DEBT = 10000000, 60000000, 120000000, 4503599627370496
  local APPLIED, KNOWN, LOST = 1, 2, 4
  local call, sub, unpackd, pack = redis.call, string.sub, struct.unpack, struct.pack
  local H = K[1]
  local function ceildiv(a, b)
    return floor((a + b - 1) / b)
  end

  local rf, hf = 'r:' .. rid, 'h:' .. member
  fetch(H, { rf, hf, 'h', 'e' })
  local rec = field(rf)

  if not rec then
    call('ZREM', K[4], rid)
    call('ZREM', K[5], rid)
    local s = call('ZSCORE', K[3], rid)
    if s and tonumber(s) > now - SETTLED_WINDOW then
      return KNOWN
    end
    -- The hold is unknown. If it was placed in an earlier generation of the team's
    -- counters (Redis lost them and the team was rebuilt since), the rebuild could not
    -- see this request: charge its cost to the current periods, to the counters that
    -- exist (TeamState lists every budget that applies). Otherwise it was never
    -- admitted with a hold, or Redis lost it and has not been rebuilt yet (the ledger
    -- row will count), so nothing changes. A replay that spans a loss of Redis (the
    -- first settle before it, the replay after the rebuild) finds no trace and is
    -- charged again: an over-count, never an under-count.
    if epoch == 0 then
      return 0
    end
    local e = field('e')
    if e and unpackd('<d', e) == epoch then
      return 0
    end
    -- Lost. Remember the id either way, so that a replay is not charged (again).
    call('ZADD', K[3], now, rid)
    call('ZREMRANGEBYSCORE', K[3], '-inf', now - SETTLED_WINDOW)
    call('PEXPIRE', K[3], ceildiv(SETTLED_WINDOW + SLACK, 1000))
    if not e or cost == 0 then
      return 0
    end
    local names = { 'o:' .. member, 'o', 'd:' .. member, 'd', 'm:' .. member, 'm' }
    fetch(H, names)
    for i = 1, 6 do
      local c = field(names[i])
      if c then
        local p, spent = unpackd('<dd', c)
        local kind = floor((i + 1) / 2)
        if kind == 1 or p == period_at(kind, now) then
          written[names[i]] = pack('<dd', p, spent + cost)
        end
      end
    end
    -- Counted in this generation: a late charge of its ledger row (late.lua) skips it.
    call('ZADD', K[6], 0, rid)
    return APPLIED + LOST
  end

  local a, k, mk, mp, tk, tp, mt, tt, slots, ml = unpackd('<dddddddddd', rec)
  if sub(rec, 81, 80 + ml) ~= member then
    -- Another member's request: not this settle's to touch.
    return 0
  end
  if slots == 1 or slots == 3 then
    call('ZREM', K[4], rid)
  end
  if slots >= 2 then
    call('ZREM', K[5], rid)
  end
  call('ZREM', K[2], rid)

  -- What else to read: the spend fields to charge, the TPM buckets to refund.
  local names = {}
  local charge_m, charge_t, refund_m, refund_t
  if cost > 0 and mk > 0 then
    charge_m = sub('odm', mk, mk) .. ':' .. member
    names[#names + 1] = charge_m
  end
  if cost > 0 and tk > 0 then
    charge_t = sub('odm', tk, tk)
    names[#names + 1] = charge_t
  end
  if k ~= tokens and mt > 0 then
    refund_m = 'q:' .. member
    names[#names + 1] = refund_m
  end
  if k ~= tokens and tt > 0 then
    refund_t = 'q'
    names[#names + 1] = refund_t
  end
  fetch(H, names)

  -- held is a held sum's value, 0 when it is missing.
  local function held(x)
    if x then
      return unpackd('<d', x)
    end
    return 0
  end
  if a > 0 and mk > 0 then
    written[hf] = pack('<d', held(field(hf)) - a)
  end
  if a > 0 and tk > 0 then
    written.h = pack('<d', held(field('h')) - a)
  end

  -- charge adds the cost to spend field f if it is on the hold's period p or an
  -- earlier one; a field already on a later period has moved on (the ledger's history).
  local function charge(f, p)
    local fp, spent = -1, 0
    local c = field(f)
    if c then
      fp, spent = unpackd('<dd', c)
    end
    if fp < p then
      spent = 0
    elseif fp > p then
      return
    end
    written[f] = pack('<dd', p, spent + cost)
  end
  if charge_m then
    charge(charge_m, mp)
  end
  if charge_t then
    charge(charge_t, tp)
  end

  -- refund returns reserved−actual tokens to TPM bucket f, or takes the excess: the
  -- bucket may go below zero, a debt that refuses the next requests until repaid.
  local function refund(f, rate)
    local tokens_now, ts = nil, now
    local c = field(f)
    if c then
      tokens_now, ts, rate = unpackd('<ddd', c)
    end
    local cap = rate * UNIT
    if not tokens_now or tokens_now > cap then
      tokens_now = cap
    end
    if now > ts then
      if now - ts >= ceildiv(cap - tokens_now, rate) then
        tokens_now = cap
      else
        tokens_now = tokens_now + (now - ts) * rate
      end
      ts = now
    end
    tokens_now = tokens_now + (k - tokens) * UNIT
    if tokens_now > cap then
      tokens_now = cap
    elseif tokens_now < -MAX_DEBT then
      tokens_now = -MAX_DEBT
    end
    written[f] = pack('<ddd', tokens_now, ts, rate)
  end
  if refund_m then
    refund(refund_m, mt)
  end
  if refund_t then
    refund(refund_t, tt)
  end

  written[rf] = false
  return APPLIED + KNOWN
end
