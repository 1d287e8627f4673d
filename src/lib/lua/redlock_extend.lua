-- redlock_extend.lua: compare-and-pexpire on one RedLock node.
-- KEYS[1]  lock key   ARGV[1] token   ARGV[2] lease ms
-- Returns 1 extended, 0 not ours (expired or taken)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
