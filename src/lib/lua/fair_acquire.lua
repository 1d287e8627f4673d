-- fair_acquire.lua: FIFO reentrant lock step. The lock hash has the same
-- layout as the reentrant lock ({owner: count}, PEXPIRE = lease); waiters
-- queue in a list and each keeps a heartbeat deadline (server clock) in a
-- zset. Waiters whose deadline passed (crashed, or gave up silently) are
-- purged on every call, so a dead waiter stalls the queue for at most its
-- waiter ttl. Only the head of the queue may take a free lock.
-- KEYS[1]  lock hash   KEYS[2] queue list   KEYS[3] zset waiter -> deadline
-- ARGV[1]  owner   ARGV[2] lease ms
-- ARGV[3]  waiter ttl ms (0: a one-shot try that never joins the queue)
-- ARGV[4]  wake channel prefix (the head waiter listens on prefix .. owner)
-- ARGV[5]  publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns {1, 0}       acquired (or re-entered)
--         {0, hint_ms} queued (or still queued); hint: lock ttl or waiter ttl
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
for _, id in ipairs(dead) do redis.call('LREM', KEYS[2], 0, id) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local ishash = redis.call('TYPE', KEYS[1]).ok == 'hash'
if ishash and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 0}
end
local free = redis.call('EXISTS', KEYS[1]) == 0
local head = redis.call('LINDEX', KEYS[2], 0)
if free and (not head or head == ARGV[1]) then
  if head then
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], ARGV[1])
  end
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 0}
end
if free and #dead > 0 then redis.call(ARGV[5], ARGV[4] .. head, 'purged') end
local hint = redis.call('PTTL', KEYS[1])
if tonumber(ARGV[3]) == 0 then return {0, hint} end
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  redis.call('RPUSH', KEYS[2], ARGV[1])
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[1])
if hint < 0 then hint = tonumber(ARGV[3]) end
return {0, hint}
