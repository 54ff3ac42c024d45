-- ADMIT: the whole admission decision for one request, atomically.
-- KEYS, ARGV and the reply are laid out in redis.go (admitScript).
--
-- Three phases, so that later checks (token reservations, spend holds) slot in without
-- breaking the rule that a refusal writes nothing: gather state and run every check
-- read-only, pick the verdict, and only if every check passed commit every reservation.
--
-- Lua 5.1 numbers are doubles, exact only for integers below 2^53. Every value here is
-- such an integer, and integers reach Redis through int() rather than Lua's lossy
-- %.14g conversion. Division is exact too: for integers with a + b < 2^53, the correctly
-- rounded a / b cannot reach the next integer, so math.floor(a / b) is the integer
-- quotient; Policy.Validate bounds every dividend here accordingly.

local function int(x)
  return string.format('%d', x)
end

local function ceildiv(a, b)
  return math.floor((a + b - 1) / b)
end

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local key_id, member, rid = ARGV[2], ARGV[3], ARGV[4]
local lease, conc_retry_cap, ttl_slack = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local RATE, CONCURRENCY, REVOKED, CUT_OFF = 1, 2, 3, 4
local MEMBER, TEAM = 1, 2

-- ttl is the PEXPIRE (ms) for state that reads as empty after us microseconds, so an
-- idle member's keys disappear; the slack keeps a key until it is surely empty.
local function ttl(us)
  return int(ceildiv(us + ttl_slack, 1000))
end

-- Token bucket in scaled units: one token is `period` units and the bucket refills
-- `limit` units per microsecond, so refills are whole numbers with no drift.
local function bucket(key, scope, limit, period, burst)
  local cap = burst * period
  local tokens, ts = cap, now
  local st = redis.call('HMGET', key, 'tokens', 'ts', 'period')
  if st[1] then
    tokens, ts = tonumber(st[1]), tonumber(st[2])
    local was = tonumber(st[3])
    if was ~= period then
      -- The period changed: keep the whole tokens, in the new units.
      tokens = math.min(math.floor(tokens / was), burst) * period
    end
    tokens = math.min(tokens, cap)
  end
  -- A clock that steps back refills nothing, and ts never moves back.
  if now > ts then
    if now - ts >= ceildiv(cap - tokens, limit) then
      tokens = cap
    else
      tokens = tokens + (now - ts) * limit
    end
    ts = now
  end
  local c = { reason = RATE, scope = scope, limit = limit, remaining = 0, retry = 0 }
  if tokens < period then
    c.reset = ceildiv(cap - tokens, limit)
    c.retry = ceildiv(period - tokens, limit)
    return c
  end
  local left = tokens - period
  c.ok = true
  c.remaining = math.floor(left / period)
  c.reset = ceildiv(cap - left, limit)
  c.commit = function()
    redis.call('HSET', key, 'tokens', int(left), 'ts', int(ts), 'period', int(period))
    redis.call('PEXPIRE', key, ttl(c.reset))
  end
  return c
end

-- Sliding window log: one entry per admitted request, member = request id (unique, so
-- two requests in the same microsecond stay two), score = admission time. An entry
-- counts while score > now - period.
local function window(key, scope, limit, period)
  local from = '(' .. int(now - period)
  local count = redis.call('ZCOUNT', key, from, '+inf')
  local c = { reason = RATE, scope = scope, limit = limit, remaining = 0, retry = 0 }
  local newest = now
  if count > 0 then
    local e = redis.call('ZREVRANGEBYSCORE', key, '+inf', from, 'WITHSCORES', 'LIMIT', 0, 1)
    newest = tonumber(e[2])
  end
  if count >= limit then
    -- Admitted once every entry up to this one has left the window.
    local e = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'WITHSCORES', 'LIMIT', count - limit, 1)
    c.retry = tonumber(e[2]) + period - now
    c.reset = newest + period - now
    return c
  end
  c.ok = true
  c.remaining = limit - count - 1
  c.reset = math.max(newest, now) + period - now
  c.commit = function()
    redis.call('ZADD', key, int(now), rid)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now - period))
    redis.call('PEXPIRE', key, ttl(c.reset))
  end
  return c
end

-- Concurrency slots: member = request id, score = lease expiry. A slot is held while
-- score > now, so a crashed gateway's slot returns when its lease ends.
local function slots(key, scope, cap)
  local active = redis.call('ZCOUNT', key, '(' .. int(now), '+inf')
  local c = { reason = CONCURRENCY, scope = scope, limit = cap, remaining = 0, reset = 0, retry = 0 }
  if active >= cap then
    local e = redis.call('ZRANGEBYSCORE', key, '(' .. int(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    c.retry = math.min(tonumber(e[2]) - now, conc_retry_cap)
    c.reset = c.retry
    return c
  end
  c.ok = true
  c.remaining = cap - active - 1
  c.commit = function()
    -- Expired leases sort first; sweep at most 100 per call so that one call after
    -- a mass crash stays short. Counting ignores them anyway.
    local expired = redis.call('ZCARD', key) - active
    if expired > 0 then
      redis.call('ZREMRANGEBYRANK', key, 0, math.min(expired, 100) - 1)
    end
    redis.call('ZADD', key, int(now + lease), rid)
    local want = lease + ttl_slack
    if redis.call('PTTL', key) * 1000 < want then
      redis.call('PEXPIRE', key, ttl(lease))
    end
  end
  return c
end

local function policy(checks, first, scope, rate_key, conc_key)
  local algo = tonumber(ARGV[first])
  local limit, period, burst = tonumber(ARGV[first + 1]), tonumber(ARGV[first + 2]), tonumber(ARGV[first + 3])
  if algo == 1 then
    checks[#checks + 1] = bucket(rate_key, scope, limit, period, burst)
  elseif algo == 2 then
    checks[#checks + 1] = window(rate_key, scope, limit, period)
  end
  local cap = tonumber(ARGV[first + 4])
  if cap > 0 then
    checks[#checks + 1] = slots(conc_key, scope, cap)
  end
end

-- Phase 1: gather state and run every check; nothing is written.
if redis.call('SISMEMBER', KEYS[1], key_id) == 1 then
  return { 0, REVOKED, MEMBER, 0, 0, 0, 0 }
end
if redis.call('SISMEMBER', KEYS[2], member) == 1 then
  return { 0, CUT_OFF, MEMBER, 0, 0, 0, 0 }
end
local checks = {}
policy(checks, 8, MEMBER, KEYS[3], KEYS[4])
policy(checks, 13, TEAM, KEYS[5], KEYS[6])

-- Phase 2: the verdict. A refusing rate limit wins over a refusing concurrency cap
-- (its wait is exact, and a rate refusal stays valid until then), then the longest wait.
-- When all pass, the headers report the rate limit with the fewest requests left.
local worst, tightest
for _, c in ipairs(checks) do
  if not c.ok then
    if not worst or c.reason < worst.reason or (c.reason == worst.reason and c.retry > worst.retry) then
      worst = c
    end
  elseif c.reason == RATE and (not tightest or c.remaining < tightest.remaining) then
    tightest = c
  end
end
if worst then
  return { 0, worst.reason, worst.scope, worst.limit, worst.remaining, worst.reset, worst.retry }
end

-- Phase 3: every check passed; commit every reservation.
for _, c in ipairs(checks) do
  c.commit()
end
if tightest then
  return { 1, 0, tightest.scope, tightest.limit, tightest.remaining, tightest.reset, 0 }
end
return { 1, 0, 0, 0, 0, 0, 0 }
