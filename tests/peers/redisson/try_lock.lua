-- try_lock.lua: Redisson RLock's acquire, written here to the protocol of
-- tryLockInnerAsync in Redisson's RedissonLock.java (Redisson 3.x): the
-- lock is a hash whose one field "<client id>:<thread id>" counts holds.
-- KEYS[1] lock name
-- ARGV[1] lease ms, ARGV[2] owner field "<client id>:<thread id>"
-- Returns nil when acquired or re-entered (count + 1, lease reset); else
-- the lock's remaining pttl (held by another owner).
local free = redis.call('exists', KEYS[1]) == 0
if free or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
