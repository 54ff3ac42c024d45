-- SETTLE: replace one request's hold with what it really cost, and free its
-- concurrency slots. KEYS, ARGV and the reply are laid out in redis.go (settleScript);
-- local.go's Settle is the same logic in Go. period.lua is prepended.
--
-- Only the hold stored under this request id is ever touched: a settle for id X
-- cannot reach id Y's hold, and once X's hold is gone a replay finds nothing to undo.

local call, format, match, sub = redis.call, string.format, string.match, string.sub
-- Shared with Go: ttlSlack, tokenUnit, SettledWindow, maxDebt.
local SLACK, UNIT, SETTLED_WINDOW, MAX_DEBT = 10000000, 60000000, 120000000, 4503599627370496

local now = tonumber(ARGV[1])
if not now then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local nows = format('%d', now)
local rid, member, epoch = ARGV[2], ARGV[3], ARGV[6]
local cost, tokens = tonumber(ARGV[4]), tonumber(ARGV[5])

local function ceildiv(a, b)
  return floor((a + b - 1) / b)
end

local function ttl(us)
  return ceildiv(us + SLACK, 1000)
end

-- remember keeps the request id as settled for SETTLED_WINDOW, so a replay says Known.
local function remember()
  local key = KEYS[4]
  call('ZADD', key, nows, rid)
  call('ZREMRANGEBYSCORE', key, '-inf', format('%d', now - SETTLED_WINDOW))
  local ms = ttl(SETTLED_WINDOW)
  if call('PEXPIRE', key, ms, 'GT') == 0 then
    call('PEXPIRE', key, ms, 'NX')
  end
end

local rec = call('HGET', KEYS[2], 'r:' .. rid)
local a, k, mk, mp, tk, tp, mt, tt, ml, pos
if rec then
  a, k, mk, mp, tk, tp, mt, tt, ml, pos = match(rec, '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) ()')
  ml = tonumber(ml)
  if sub(rec, pos, pos + ml - 1) ~= member then
    -- Another member's request: not this settle's to touch.
    return { 0, 0, 0 }
  end
end
call('ZREM', KEYS[5], rid)
call('ZREM', KEYS[6], rid)

if not rec then
  local s = call('ZSCORE', KEYS[4], rid)
  if s and tonumber(s) > now - SETTLED_WINDOW then
    return { 0, 1, 0 }
  end
  -- The hold is unknown. If it was placed in an earlier generation of the team's
  -- counters (Redis lost them and the team was rebuilt since), the rebuild could not
  -- see this request: charge its cost to the current periods, to the counters that
  -- exist (TeamState lists every budget that applies). Otherwise it was never
  -- admitted with a hold, or Redis lost it and has not been rebuilt yet (the ledger
  -- row will count), so nothing changes. A replay that spans a loss of Redis (the
  -- first settle before it, the replay after the rebuild) finds no trace and is
  -- charged again: an over-count, never an under-count.
  if epoch == '0' then
    return { 0, 0, 0 }
  end
  local e = call('GET', KEYS[1])
  if e == epoch then
    return { 0, 0, 0 }
  end
  -- Lost. Remember the id either way, so that a replay is not charged (again).
  remember()
  if not e or cost == 0 then
    return { 0, 0, 0 }
  end
  local costs = format('%d', cost)
  for kind = 1, 3 do
    local key = KEYS[8 + kind]
    local v = call('HMGET', key, 'p', 'm:' .. member, 't')
    if kind == 1 or (v[1] and tonumber(v[1]) == period_at(kind, now)) then
      if v[2] then
        call('HINCRBY', key, 'm:' .. member, costs)
      end
      if v[3] then
        call('HINCRBY', key, 't', costs)
      end
    end
  end
  return { 1, 0, 1 }
end

a, k, mk, mp, tk, tp, mt, tt = tonumber(a), tonumber(k), tonumber(mk), tonumber(mp), tonumber(tk), tonumber(tp),
  tonumber(mt), tonumber(tt)
call('HDEL', KEYS[2], 'r:' .. rid)
if a > 0 and mk > 0 then
  call('HINCRBY', KEYS[2], 'hm:' .. member, format('%d', -a))
end
if a > 0 and tk > 0 then
  call('HINCRBY', KEYS[2], 'ht', format('%d', -a))
end
call('ZREM', KEYS[3], rid)

-- charge adds the cost to field of the spend counter of kind, if the hold's period p
-- is still the current one there; a period already over is history (the ledger's).
local function charge(kind, p, field)
  local key = KEYS[8 + kind]
  if kind > 1 and tonumber(call('HGET', key, 'p')) ~= p then
    return
  end
  call('HINCRBY', key, field, format('%d', cost))
end
if cost > 0 then
  if mk > 0 then
    charge(mk, mp, 'm:' .. member)
  end
  if tk > 0 then
    charge(tk, tp, 't')
  end
end

-- refund returns reserved−actual tokens to a TPM bucket, or takes the excess: the
-- bucket may go below zero, a debt that refuses the next requests until repaid.
local function refund(key, rate)
  local tokens_now, ts = nil, now
  local st = call('GET', key)
  if st then
    tokens_now, ts, rate = struct.unpack('<ddd', st)
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
  call('SET', key, struct.pack('<ddd', tokens_now, ts, rate), 'PX', ttl(ceildiv(cap - tokens_now, rate)))
end
if k ~= tokens then
  if mt > 0 then
    refund(KEYS[7], mt)
  end
  if tt > 0 then
    refund(KEYS[8], tt)
  end
end
remember()
return { 1, 1, 0 }
