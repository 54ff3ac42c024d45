-- SETTLE: settle one request's hold (settle_hold.lua, prepended with period.lua).
-- KEYS, ARGV and the reply are laid out in redis.go (settleScript). It reads the team
-- hash with one HMGET (two when it charges) and writes it with one HSET.

local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
local cost, tokens, epoch = struct.unpack('<ddd', ARGV[4])
local r = settle_hold(now, KEYS, ARGV[2], ARGV[3], cost, tokens, epoch)
flush(KEYS[1], {})
return r
