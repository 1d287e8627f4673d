-- unlock.lua: Redisson RLock's release, to the protocol of unlockInnerAsync
-- in Redisson's RedissonLock.java (Redisson 3.x).
-- KEYS[1] lock name, KEYS[2] unlock channel "redisson_lock__channel:{<name>}"
-- ARGV[1] unlock message (Redisson sends 0), ARGV[2] lease ms (re-set while
-- holds remain), ARGV[3] owner field "<client id>:<thread id>"
-- Returns nil: not held by this owner (nothing changed); 0: one hold less,
-- still held; 1: last hold released, key deleted, ARGV[1] published.
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
