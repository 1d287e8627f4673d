-- sem_available.lua: permits available now, counting expired holders'
-- permits as available (they are purged by the next acquire).
-- KEYS[1]  meta hash {limit, used}
-- KEYS[2]  zset holder id -> expiry (ms)
-- KEYS[3]  hash holder id -> permits held
-- Returns available count, or -1 when the semaphore was never used
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(redis.call('HGET', KEYS[1], 'limit'))
if limit == nil then return -1 end
local used = tonumber(redis.call('HGET', KEYS[1], 'used')) or 0
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(dead) do
  used = used - (tonumber(redis.call('HGET', KEYS[3], id)) or 0)
end
return limit - used
