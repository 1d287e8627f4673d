-- rlock_release.lua: reentrant lock release, Redisson RLock protocol: one
-- hold less; at zero delete the key and publish "0" on the channel.
-- KEYS[1] lock key, KEYS[2] (optional) its label key: renewed or deleted
-- with it
-- ARGV[1] owner, ARGV[2] lease ms (re-set while holds remain),
-- ARGV[3] channel (redisson_lock__channel:{<name>}), ARGV[4] publish
-- command: PUBLISH, or SPUBLISH (sharded, on a Cluster; Redisson does the same)
-- Returns holds left (>= 1), 0 released; -1 no such key; -2 held by
-- another owner (or not a hash).
if redis.call('exists', KEYS[1]) == 0 then return -1 end
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -2
end
local n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if n > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  if KEYS[2] then redis.call('pexpire', KEYS[2], ARGV[2]) end
  return n
end
redis.call('del', KEYS[1])
if KEYS[2] then redis.call('del', KEYS[2]) end
redis.call(ARGV[4], ARGV[3], '0')
return 0
