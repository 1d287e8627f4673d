-- redlock_release.lua: compare-and-delete on one RedLock node.
-- KEYS[1]  lock key   ARGV[1] token
-- Returns 1 deleted, 0 not ours (expired or taken)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
