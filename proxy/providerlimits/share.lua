-- Keeps the newest observation of one target's account, and the latest block,
-- whichever replica writes last: an older answer never replaces a newer one.
-- KEYS[1] the target's hash
-- ARGV    1 sent ms, 2 limit, 3 remaining, 4 account requests/s, 5 blocked until ms, 6 ttl ms
local cur = redis.call('HMGET', KEYS[1], 'sent', 'blocked')
if tonumber(ARGV[1]) > 0 and (not cur[1] or tonumber(ARGV[1]) > tonumber(cur[1])) then
  redis.call('HSET', KEYS[1], 'sent', ARGV[1], 'limit', ARGV[2], 'remaining', ARGV[3], 'rate', ARGV[4])
end
if not cur[2] or tonumber(ARGV[5]) > tonumber(cur[2]) then
  redis.call('HSET', KEYS[1], 'blocked', ARGV[5])
end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
