-- rw_renew.lua: watchdog renewal of whatever side(s) the owner holds.
-- KEYS[1]  writer hash {owner, n}
-- KEYS[2]  zset reader owner -> expiry (ms)
-- ARGV[1]  owner   ARGV[2] lease ms
-- Returns a bit mask: 1 = write side renewed, 2 = read side renewed
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mask = 0
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  mask = 1
end
local exp = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
if exp ~= nil and exp > now then
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
  mask = mask + 2
end
return mask
