-- lock_renew.lua: simple lock compare-and-pexpire: the simple lock's
-- watchdog and extend, and RedLock's extend on each node (same layout:
-- key = token string).
-- KEYS[1] lock key, KEYS[2] (optional) its label key: renewed with it
-- ARGV[1] token, ARGV[2] lease ms
-- Returns 1 renewed; 0 not held by this token (gone, taken, or not a
-- string: pcall turns WRONGTYPE into a non-matching value).
if redis.pcall('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  if KEYS[2] then redis.call('pexpire', KEYS[2], ARGV[2]) end
  return 1
end
return 0
