-- rlock_acquire.lua: reentrant lock acquire, Redisson RLock layout:
-- hash KEYS[1] { owner: hold count } with a lease.
-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] (optional) label key (all
-- in KEYS[1]'s hash slot)
-- ARGV[1] owner ("<client id>:<thread id>"), ARGV[2] lease ms,
-- ARGV[3] fence key expiry ms (set when the
-- counter is seeded; once it expires the next acquisition reseeds it),
-- ARGV[4] (optional) label: as in lock_acquire.lua, written by a first
-- acquisition; a re-entry renews it with the lock
-- Fence: as in lock_acquire.lua (INCR, or server TIME in us without key).
-- Returns {1, fence} first acquisition; {2, count, fence} re-entry (fence =
-- current fence key value or 0); {0, pttl} held by someone else (also when
-- the key is not a hash, e.g. a simple lock of the same name).
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  local fence = redis.call('incr', KEYS[2])
  if fence == 1 then -- no fence key (first use, expired or lost): seed from the clock
    local t = redis.call('time')
    fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('set', KEYS[2], string.format('%.0f', fence), 'PX', ARGV[3])
  end
  if KEYS[3] and ARGV[4] then
    redis.call('del', KEYS[3])
    redis.call('hset', KEYS[3], ARGV[1], ARGV[4], '', string.format('%.0f', fence))
    redis.call('pexpire', KEYS[3], ARGV[2])
  end
  return {1, fence}
end
if redis.call('type', KEYS[1]).ok == 'hash' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  local n = redis.call('hincrby', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  if KEYS[3] then redis.call('pexpire', KEYS[3], ARGV[2]) end
  return {2, n, tonumber(redis.call('get', KEYS[2]) or '0') or 0}
end
return {0, redis.call('pttl', KEYS[1])}
