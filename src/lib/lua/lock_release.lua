-- lock_release.lua: simple lock compare-and-delete, then wake waiters.
-- KEYS[1] lock key, KEYS[2] (optional) its label key: deleted with it
-- ARGV[1] token, ARGV[2] unlock channel,
-- ARGV[3] publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns 1 released; -1 no such key; -2 held by another token (or the
-- key is not a string, e.g. a reentrant lock of the same name: pcall
-- turns WRONGTYPE into a value that matches no token).
-- RedLock nodes use redlock_release.lua (no publish; see there).
local v = redis.pcall('get', KEYS[1])
if v == ARGV[1] then
  redis.call('del', KEYS[1])
  if KEYS[2] then redis.call('del', KEYS[2]) end
  redis.call(ARGV[3], ARGV[2], '0')
  return 1
end
if v == false then return -1 end
return -2
