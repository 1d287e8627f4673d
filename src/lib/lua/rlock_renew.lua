-- rlock_renew.lua: owner-checked pexpire of an owner-count lock hash: the
-- reentrant lock's watchdog and extend, and the fair lock's watchdog (the
-- fair lock keeps the reentrant lock's hash layout, so one script serves).
-- KEYS[1] lock key, KEYS[2] (optional) its label key: renewed with it
-- ARGV[1] owner, ARGV[2] lease ms
-- Returns 1 renewed; 0 this owner holds no count (gone or taken).
if redis.call('type', KEYS[1]).ok == 'hash' and redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  if KEYS[2] then redis.call('pexpire', KEYS[2], ARGV[2]) end
  return 1
end
return 0
