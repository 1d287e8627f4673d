-- sem_extend.lua: pushes holder id's expiry to now + lease (server clock)
-- if its permits have not expired yet. Used by the watchdog and by
-- dlock_permits_extend.
-- KEYS[1]  zset holder id -> expiry (ms)
-- ARGV[1]  holder id   ARGV[2] lease ms
-- Returns 1 extended, 0 not held (never taken, released or expired)
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if exp == nil or exp <= now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 1
