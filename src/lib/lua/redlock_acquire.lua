-- redlock_acquire.lua: one RedLock node's part: SET NX PX, and on success a
-- per-node fencing counter that only ever grows (while the node keeps data).
-- KEYS[1]  lock key   KEYS[2] fencing counter key
-- ARGV[1]  token   ARGV[2] lease ms
-- Returns the node's fencing token (>= 1) when acquired, 0 when held by another
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
