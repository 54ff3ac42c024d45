-- TAKE: reserve one sign-in attempt under every key, all or none.
-- KEYS  one sorted set per bucket: attempt id -> its time (µs of Redis's clock)
-- ARGV  mode ("take" or "peek"), window (µs), attempt id, then each key's limit
-- Returns the µs until every key has room (0: taken, or would be).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[2])
local wait = 0
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local limit = tonumber(ARGV[3 + i])
  local n = redis.call('ZCARD', key)
  if n >= limit then
    -- The attempt whose leaving makes room: the limit-th newest.
    local at = redis.call('ZRANGE', key, n - limit, n - limit, 'WITHSCORES')
    wait = math.max(wait, tonumber(at[2]) + window - now)
  end
end
if wait > 0 or ARGV[1] ~= 'take' then
  return wait
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, math.ceil(window / 1000))
end
return 0
