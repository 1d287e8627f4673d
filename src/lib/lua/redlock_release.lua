-- redlock_release.lua: compare-and-delete on one RedLock node.
-- KEYS[1]  lock key   ARGV[1] token
-- Returns 1 deleted, 0 not ours (expired or taken)
-- Not lock_release.lua: that one also publishes on the simple lock's
-- unlock channel and tells "no key" from "another token"; RedLock has no
-- pub/sub waiters and needs neither, and a publish on its nodes would wake
-- simple-lock waiters of the same name there.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
