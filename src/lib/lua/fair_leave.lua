-- fair_leave.lua: a waiter that timed out or was cancelled leaves the queue;
-- if it was the head and the lock is free, the new head is woken.
-- KEYS[1]  lock hash   KEYS[2] queue list   KEYS[3] zset waiter -> deadline
-- ARGV[1]  owner   ARGV[2] wake channel prefix
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns 1 if the owner was queued, else 0
local was_head = redis.call('LINDEX', KEYS[2], 0) == ARGV[1]
local n = redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if was_head and redis.call('EXISTS', KEYS[1]) == 0 then
  local head = redis.call('LINDEX', KEYS[2], 0)
  if head then redis.call(ARGV[3], ARGV[2] .. head, 'left') end
end
if n > 0 then return 1 end
return 0
