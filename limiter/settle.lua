-- SETTLE: replace one request's hold with what it really cost, and free its
-- concurrency slots. KEYS, ARGV and the reply are laid out in redis.go (settleScript);
-- local.go's Settle is the same logic in Go. period.lua is prepended. Like ADMIT it
-- reads the team hash with one HMGET (two when it charges) and writes it with one HSET.
--
-- Only the hold stored under this request id is ever touched: a settle for id X
-- cannot reach id Y's hold, and once X's hold is gone a replay finds nothing to undo.

local call, sub, unpack, pack, unpackd = redis.call, string.sub, unpack, struct.pack, struct.unpack
-- Shared with Go: ttlSlack, tokenUnit, SettledWindow, maxDebt.
local SLACK, UNIT, SETTLED_WINDOW, MAX_DEBT = 10000000, 60000000, 120000000, 4503599627370496
-- The reply: applied + 2 × known + 4 × lost.
local APPLIED, KNOWN, LOST = 1, 2, 4

local now = tonumber(ARGV[1])
if not now then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local H, rid, member = KEYS[1], ARGV[2], ARGV[3]
local cost, tokens, epoch = unpackd('<ddd', ARGV[4])

local function ceildiv(a, b)
  return floor((a + b - 1) / b)
end

local rf, hf = 'r:' .. rid, 'h:' .. member
local v = call('HMGET', H, rf, hf, 'h', 'e')
local rec = v[1]

if not rec then
  call('ZREM', KEYS[4], rid)
  call('ZREM', KEYS[5], rid)
  local s = call('ZSCORE', KEYS[3], rid)
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
  local e = v[4]
  if e and unpackd('<d', e) == epoch then
    return 0
  end
  -- Lost. Remember the id either way, so that a replay is not charged (again).
  call('ZADD', KEYS[3], now, rid)
  call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - SETTLED_WINDOW)
  call('PEXPIRE', KEYS[3], ceildiv(SETTLED_WINDOW + SLACK, 1000))
  if not e or cost == 0 then
    return 0
  end
  local names = { 'o:' .. member, 'o', 'd:' .. member, 'd', 'm:' .. member, 'm' }
  local cur = call('HMGET', H, unpack(names))
  local set = {}
  for i = 1, 6 do
    local c = cur[i]
    if c then
      local p, spent = unpackd('<dd', c)
      local kind = floor((i + 1) / 2)
      if kind == 1 or p == period_at(kind, now) then
        set[#set + 1], set[#set + 2] = names[i], pack('<dd', p, spent + cost)
      end
    end
  end
  if #set > 0 then
    call('HSET', H, unpack(set))
  end
  -- Counted in this generation: a late charge of its ledger row (late.lua) skips it.
  call('ZADD', KEYS[6], 0, rid)
  return APPLIED + LOST
end

local a, k, mk, mp, tk, tp, mt, tt, slots, ml = unpackd('<dddddddddd', rec)
if sub(rec, 81, 80 + ml) ~= member then
  -- Another member's request: not this settle's to touch.
  return 0
end
if slots == 1 or slots == 3 then
  call('ZREM', KEYS[4], rid)
end
if slots >= 2 then
  call('ZREM', KEYS[5], rid)
end
call('ZREM', KEYS[2], rid)

-- What else to read: the spend fields to charge, the TPM buckets to refund.
local names = {}
local charge_m, charge_t, refund_m, refund_t
if cost > 0 and mk > 0 then
  names[#names + 1] = sub('odm', mk, mk) .. ':' .. member
  charge_m = #names
end
if cost > 0 and tk > 0 then
  names[#names + 1] = sub('odm', tk, tk)
  charge_t = #names
end
if k ~= tokens and mt > 0 then
  names[#names + 1] = 'q:' .. member
  refund_m = #names
end
if k ~= tokens and tt > 0 then
  names[#names + 1] = 'q'
  refund_t = #names
end
local cur = {}
if #names > 0 then
  cur = call('HMGET', H, unpack(names))
end

-- held is a held sum's value, 0 when it is missing.
local function held(x)
  if x then
    return unpackd('<d', x)
  end
  return 0
end
local set = {}
if a > 0 and mk > 0 then
  set[#set + 1], set[#set + 2] = hf, pack('<d', held(v[2]) - a)
end
if a > 0 and tk > 0 then
  set[#set + 1], set[#set + 2] = 'h', pack('<d', held(v[3]) - a)
end

-- charge adds the cost to spend field i if it is on the hold's period p or an
-- earlier one; a field already on a later period has moved on (the ledger's history).
local function charge(i, p)
  local fp, spent = -1, 0
  if cur[i] then
    fp, spent = unpackd('<dd', cur[i])
  end
  if fp < p then
    spent = 0
  elseif fp > p then
    return
  end
  set[#set + 1], set[#set + 2] = names[i], pack('<dd', p, spent + cost)
end
if charge_m then
  charge(charge_m, mp)
end
if charge_t then
  charge(charge_t, tp)
end

-- refund returns reserved−actual tokens to TPM bucket i, or takes the excess: the
-- bucket may go below zero, a debt that refuses the next requests until repaid.
local function refund(i, rate)
  local tokens_now, ts = nil, now
  if cur[i] then
    tokens_now, ts, rate = unpackd('<ddd', cur[i])
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
  set[#set + 1], set[#set + 2] = names[i], pack('<ddd', tokens_now, ts, rate)
end
if refund_m then
  refund(refund_m, mt)
end
if refund_t then
  refund(refund_t, tt)
end

call('HDEL', H, rf)
if #set > 0 then
  call('HSET', H, unpack(set))
end
return APPLIED + KNOWN
