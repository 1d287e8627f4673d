-- rw_release.lua: leaves one level of the read or the write side.
-- KEYS[1]  writer hash {owner, n}
-- KEYS[2]  zset reader owner -> expiry (ms)
-- KEYS[3]  hash reader owner -> re-entry count
-- ARGV[1]  owner   ARGV[2] "r" or "w"   ARGV[3] channel to publish on
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns  remaining re-entry count (>= 0) on that side, or
--          -1 when the owner does not hold that side (expired or never)
if ARGV[2] == 'w' then
  if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return -1 end
  local n = redis.call('HINCRBY', KEYS[1], 'n', -1)
  if n > 0 then return n end
  redis.call('DEL', KEYS[1])
  redis.call(ARGV[4], ARGV[3], 'w')
  return 0
end
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
if exp == nil or exp <= now then return -1 end
local n = redis.call('HINCRBY', KEYS[3], ARGV[1], -1)
if n > 0 then return n end
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call(ARGV[4], ARGV[3], 'r')
return 0
