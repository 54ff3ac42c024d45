-- RELEASE: free one request's concurrency slots, member's and team's. ZREM makes a
-- replay harmless. KEYS: member slots, team slots; ARGV: request id.
-- Returns how many slots were freed (0 on a replay).
return redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
