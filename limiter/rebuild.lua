-- REBUILD: restore a team's spend counters from the ledger after Redis lost them, only
-- if the team's marker is still missing, so replicas racing to rebuild apply one sum.
-- KEYS, ARGV and the reply are laid out in redis.go (rebuildScript); period.lua is
-- prepended.

local call, format = redis.call, string.format
local SLACK = 10000000

local now = tonumber(ARGV[1])
if not now then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local e = call('GET', KEYS[1])
if e then
  return 0
end
local at = tonumber(ARGV[3])
-- Which period kinds' sums still describe the current period.
local keep = { true, false, false }
for kind = 2, 3 do
  local ai = period_at(kind, at)
  local ni = period_at(kind, now)
  if ai > ni then
    return -1
  end
  keep[kind] = ai == ni
end

call('DEL', KEYS[2], KEYS[3], KEYS[4])
local fields = { {}, {}, {} }
local i = 4
while i <= #ARGV do
  local kind = tonumber(ARGV[i + 1])
  if keep[kind] then
    local f = fields[kind]
    f[#f + 1] = ARGV[i]
    f[#f + 1] = ARGV[i + 2]
  end
  i = i + 3
end
if #fields[1] > 0 then
  call('HSET', KEYS[2], unpack(fields[1]))
end
for kind = 2, 3 do
  if keep[kind] and #fields[kind] > 0 then
    local idx, nxt = period_at(kind, now)
    call('HSET', KEYS[1 + kind], 'p', idx, unpack(fields[kind]))
    call('PEXPIRE', KEYS[1 + kind], floor((nxt - now + SLACK + 999) / 1000))
  end
end
-- Revocations and cut-offs, then the marker.
local flags = {}
for j = 5, #KEYS do
  flags[#flags + 1] = KEYS[j]
  flags[#flags + 1] = '1'
end
flags[#flags + 1] = KEYS[1]
flags[#flags + 1] = ARGV[2]
call('MSET', unpack(flags))
return 1
