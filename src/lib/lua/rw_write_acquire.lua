-- rw_write_acquire.lua: takes (or re-enters) the write side of a read-write
-- lock. A holder of the read side is refused (upgrade would deadlock two
-- upgrading readers); a blocked writer records an intent that holds back new
-- readers (see rw_read_acquire.lua).
-- KEYS[1]  writer hash {owner, n} with PEXPIRE = lease
-- KEYS[2]  zset reader owner -> expiry (ms, server clock)
-- KEYS[3]  hash reader owner -> re-entry count
-- KEYS[4]  zset waiting-writer owner -> intent expiry (ms)
-- ARGV[1]  owner   ARGV[2] lease ms   ARGV[3] intent ms (0: do not register)
-- Returns {1, 0}        acquired
--         {0, hint_ms}  busy
--         {-1, 0}       caller holds the read side: upgrade refused
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(dead) do redis.call('HDEL', KEYS[3], id) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local wo = redis.call('HGET', KEYS[1], 'owner')
if wo == ARGV[1] then
  redis.call('HINCRBY', KEYS[1], 'n', 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 0}
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return {-1, 0} end
local hint = -1
if wo then
  hint = redis.call('PTTL', KEYS[1])
elseif redis.call('ZCARD', KEYS[2]) > 0 then
  local r = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  hint = tonumber(r[2]) - now
end
if hint ~= -1 then
  if tonumber(ARGV[3]) > 0 then
    redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
  end
  return {0, hint}
end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'n', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[1])
return {1, 0}
