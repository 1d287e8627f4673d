-- fair_release.lua: leaves one level of a fair lock; on the last level the
-- lock is deleted and only the head waiter (after purging dead ones) is
-- woken, on its own channel.
-- KEYS[1]  lock hash   KEYS[2] queue list   KEYS[3] zset waiter -> deadline
-- ARGV[1]  owner   ARGV[2] wake channel prefix
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns remaining count (>= 0), or -1 when the owner does not hold it
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' or
   redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return -1 end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if n > 0 then return n end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, id in ipairs(dead) do redis.call('LREM', KEYS[2], 0, id) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local head = redis.call('LINDEX', KEYS[2], 0)
if head then redis.call(ARGV[3], ARGV[2] .. head, 'released') end
return 0
