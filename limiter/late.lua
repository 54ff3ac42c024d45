-- LATE: charge ledger rows that reached the ledger after a rebuild read it, so the
-- counters it built never counted them (a replica that spooled them while Postgres
-- was down). KEYS, ARGV and the reply are laid out in redis.go (lateScript);
-- period.lua is prepended.
--
-- A row is charged once per generation of the counters, to the current periods'
-- spend fields that exist, as a lost settle is (settle.lua): only if it was
-- admitted in an earlier epoch (one admitted in this one was counted as it
-- settled) and is not among the requests these counters already count (the
-- rebuild's holds and its replica's unwritten rows, lost settles, earlier late
-- charges). So a retry, or the same rows from two replicas, charges nothing more.

local call, unpack, pack, unpackd = redis.call, unpack, struct.pack, struct.unpack

local now = tonumber(ARGV[1])
if not now then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local H, C = KEYS[1], KEYS[2]
local v = call('HMGET', H, 'e', 'g')
if not v[1] then
  -- No counters: whichever rebuild comes next may have read the ledger before
  -- these rows; ask again once there are.
  return -1
end
local epoch = unpackd('<d', v[1])
local g = 0
if v[2] then
  g = unpackd('<d', v[2])
end
if g > tonumber(ARGV[2]) then
  return 0 -- rebuilt from a read that came after the rows: they are counted
end

local add, names, n = {}, {}, 0
for i = 3, #ARGV, 4 do
  local rid, member, cost, ep = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  if ep ~= 0 and ep ~= epoch and cost > 0 and not call('ZSCORE', C, rid) then
    call('ZADD', C, 0, rid)
    n = n + 1
    for _, f in ipairs({ 'o:' .. member, 'o', 'd:' .. member, 'd', 'm:' .. member, 'm' }) do
      if not add[f] then
        names[#names + 1], add[f] = f, 0
      end
      add[f] = add[f] + cost
    end
  end
end
if #names == 0 then
  return 0
end
local cur = call('HMGET', H, unpack(names))
local set = {}
for i = 1, #names do
  local c = cur[i]
  if c then
    local p, spent = unpackd('<dd', c)
    local first = string.byte(names[i], 1)
    local kind = 1
    if first == 100 then -- d
      kind = 2
    elseif first == 109 then -- m
      kind = 3
    end
    if kind == 1 or p == period_at(kind, now) then
      set[#set + 1], set[#set + 2] = names[i], pack('<dd', p, spent + add[names[i]])
    end
  end
end
if #set > 0 then
  call('HSET', H, unpack(set))
end
return n
