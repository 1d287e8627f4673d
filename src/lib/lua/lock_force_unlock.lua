-- lock_force_unlock.lua: admin delete of a lock whatever its holder, then
-- wake waiters.
-- KEYS[1] lock key, KEYS[2] (optional) its label key: deleted with it
-- ARGV[1] expected type ("string" simple, "hash" reentrant), ARGV[2] channel,
-- ARGV[3] publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns 1 deleted; 0 no key of that type.
if redis.call('type', KEYS[1]).ok ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
if KEYS[2] then redis.call('del', KEYS[2]) end
redis.call(ARGV[3], ARGV[2], '0')
return 1
