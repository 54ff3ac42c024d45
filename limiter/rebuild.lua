-- REBUILD: restore a team's spend counters from the ledger after Redis lost them, only
-- if the team's hash has no epoch, so replicas racing to rebuild apply one sum.
-- KEYS, ARGV and the reply are laid out in redis.go (rebuildScript); period.lua is
-- prepended.

local call, byte, pack = redis.call, string.byte, struct.pack

local now = tonumber(ARGV[1])
if not now then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local H, L, C = KEYS[1], KEYS[2], KEYS[3]
if call('HEXISTS', H, 'e') == 1 then
  return 0
end
local at = tonumber(ARGV[3])
-- Which period kinds' sums still describe the current period, and its index.
local keep, index = { true, false, false }, { 0, 0, 0 }
for kind = 2, 3 do
  local ai = period_at(kind, at)
  local ni = period_at(kind, now)
  if ai > ni then
    return -1
  end
  keep[kind], index[kind] = ai == ni, ni
end

-- Whatever spend, holds and sweep bound the hash still has describe a generation the
-- ledger replaces; rate and TPM buckets (s, q) and flags (k, c) stay.
local old = {}
for _, f in ipairs(call('HKEYS', H)) do
  local c = byte(f, 1)
  if c == 111 or c == 100 or c == 109 or c == 104 or c == 114 or c == 120 then -- o d m h r x
    old[#old + 1] = f
  end
end
if #old > 0 then
  call('HDEL', H, unpack(old))
end
call('DEL', L, C)

-- The requests these counters count beyond the ledger's rows (the rebuilding
-- replica's unwritten ones, and the holds below), so that a late charge of one
-- (late.lua) is not counted twice.
local i = 7
local counted = {}
for _ = 1, tonumber(ARGV[6]) do
  counted[#counted + 1], counted[#counted + 2] = 0, ARGV[i]
  i = i + 1
end

-- Flags (field names, value "1"), then (field, kind, amount) triples, then holds,
-- then the epoch and the ledger's rebuild generation.
local set = {}
local nflags = tonumber(ARGV[i])
for j = i + 1, i + nflags do
  set[#set + 1], set[#set + 2] = ARGV[j], '1'
end
i = i + 1 + nflags
local ntriples = tonumber(ARGV[i])
i = i + 1
for _ = 1, ntriples do
  local kind = tonumber(ARGV[i + 1])
  if keep[kind] then
    set[#set + 1], set[#set + 2] = ARGV[i], pack('<dd', index[kind], tonumber(ARGV[i + 2]))
  end
  i = i + 3
end
-- Holds still in flight: (request id, member, numbers, meta), the numbers packed:
-- hold, lease expiry µs, member budget kind, team budget kind (0 none). Each is
-- stored as ADMIT would have (no tokens, no slots: those are not rebuilt), counts in
-- the held sums, and ends with its lease.
local held, leases, bound = {}, {}, nil
while i <= #ARGV do
  local rid, who, meta = ARGV[i], ARGV[i + 1], ARGV[i + 3]
  local a, expiry, mk, tk = struct.unpack('<dddd', ARGV[i + 2])
  local mp, tp = 0, 0
  if mk > 0 then
    mp = index[mk]
    held['h:' .. who] = (held['h:' .. who] or 0) + a
  end
  if tk > 0 then
    tp = index[tk]
    held.h = (held.h or 0) + a
  end
  set[#set + 1], set[#set + 2] = 'r:' .. rid, pack('<dddddddddd', a, 0, mk, mp, tk, tp, 0, 0, 0, #who) .. who .. meta
  leases[#leases + 1], leases[#leases + 2] = expiry, rid
  counted[#counted + 1], counted[#counted + 2] = 0, rid
  if not bound or expiry < bound then
    bound = expiry
  end
  i = i + 4
end
for f, a in pairs(held) do
  set[#set + 1], set[#set + 2] = f, pack('<d', a)
end
-- In chunks: unpack's limit is a few thousand values.
for j = 1, #counted, 2000 do
  call('ZADD', C, unpack(counted, j, math.min(j + 1999, #counted)))
end
if bound then
  call('ZADD', L, unpack(leases))
  set[#set + 1], set[#set + 2] = 'x', pack('<d', bound)
end
-- The epoch is the rebuild's millisecond × 2048 plus a random part (ARGV 2), and
-- later than the newest epoch the rebuilding replica saw (ARGV 4): unique, and later
-- for a later rebuild, so a replica that saw one generation can tell an older one
-- come back.
local epoch = floor(now / 1000) * 2048 + tonumber(ARGV[2])
local seen = tonumber(ARGV[4])
if epoch <= seen then
  epoch = seen + 1
end
set[#set + 1], set[#set + 2] = 'e', pack('<d', epoch)
set[#set + 1], set[#set + 2] = 'g', pack('<d', tonumber(ARGV[5]))
call('HSET', H, unpack(set))
return 1
