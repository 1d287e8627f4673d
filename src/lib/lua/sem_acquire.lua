-- sem_acquire.lua: takes k permits of a bounded semaphore for holder id.
-- Permits are owner-tracked: each holder id has a count and an expiry (server
-- time); expired holders are purged first, so a crashed holder's permits come
-- back within its lease. Invariant: meta.used == sum(counts) <= meta.limit.
-- KEYS[1]  meta hash {limit, used}
-- KEYS[2]  zset holder id -> expiry (ms, server clock)
-- KEYS[3]  hash holder id -> permits held
-- ARGV[1]  holder id   ARGV[2] k   ARGV[3] lease ms   ARGV[4] limit N
-- ARGV[5]  channel published when permits come back
-- ARGV[6]  publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns {1, available_after}  acquired
--         {0, wait_hint_ms}     not enough permits (-1: no expiry pending)
--         {-2, stored_limit}    the semaphore exists with another limit
--         {-3, 0}               k > N: can never succeed
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local k, lease, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local cur = redis.call('HGET', KEYS[1], 'limit')
if not cur then
  redis.call('HSET', KEYS[1], 'limit', limit, 'used', 0)
elseif tonumber(cur) ~= limit then
  return {-2, tonumber(cur)}
end
if k > limit then return {-3, 0} end
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #dead > 0 then
  local freed = 0
  for _, id in ipairs(dead) do
    freed = freed + (tonumber(redis.call('HGET', KEYS[3], id)) or 0)
    redis.call('HDEL', KEYS[3], id)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('HINCRBY', KEYS[1], 'used', -freed)
  redis.call(ARGV[6], ARGV[5], 'expired')
end
local used = tonumber(redis.call('HGET', KEYS[1], 'used')) or 0
if limit - used >= k then
  redis.call('HINCRBY', KEYS[3], ARGV[1], k)
  redis.call('ZADD', KEYS[2], now + lease, ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'used', k)
  return {1, limit - used - k}
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #first == 0 then return {0, -1} end
return {0, tonumber(first[2]) - now}
