-- renew.lua: Redisson's watchdog renewal, to the protocol of
-- renewExpirationAsync in Redisson's RedissonLock.java (Redisson 3.x).
-- KEYS[1] lock name
-- ARGV[1] lease ms, ARGV[2] owner field "<client id>:<thread id>"
-- Returns 1 renewed (pexpire), 0 not held by this owner.
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return 0
end
redis.call('pexpire', KEYS[1], ARGV[1])
return 1
