-- sem_release.lua: gives back k permits held by holder id. Never raises the
-- available count above the limit: releasing permits the id does not hold
-- (never taken, already released, or expired and purged) is refused.
-- KEYS[1]  meta hash {limit, used}
-- KEYS[2]  zset holder id -> expiry (ms, server clock)
-- KEYS[3]  hash holder id -> permits held
-- ARGV[1]  holder id   ARGV[2] k   ARGV[3] channel to publish on
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns  1   released
--          0   the id holds no permits (or its lease expired)
--         -1   the id holds fewer than k permits (nothing changed)
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local k = tonumber(ARGV[2])
local held = tonumber(redis.call('HGET', KEYS[3], ARGV[1]))
local exp = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
if held == nil or exp == nil or exp <= now then return 0 end
if held < k then return -1 end
if held == k then
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('HINCRBY', KEYS[3], ARGV[1], -k)
end
redis.call('HINCRBY', KEYS[1], 'used', -k)
redis.call(ARGV[4], ARGV[3], 'released')
return 1
