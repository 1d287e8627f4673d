-- rw_read_acquire.lua: takes (or re-enters) the read side of a read-write lock.
-- Policy: writer preference. A writer that is waiting registers an intent
-- (with a short expiry it keeps refreshing); while any live intent exists,
-- new readers are refused, so a stream of readers cannot starve a writer.
-- Readers already holding, and the writer itself (downgrade), still enter.
-- KEYS[1]  writer hash {owner, n} with PEXPIRE = lease
-- KEYS[2]  zset reader owner -> expiry (ms, server clock)
-- KEYS[3]  hash reader owner -> re-entry count
-- KEYS[4]  zset waiting-writer owner -> intent expiry (ms)
-- ARGV[1]  owner   ARGV[2] lease ms
-- Returns {1, 0}        acquired
--         {0, hint_ms}  busy; retry after at most hint_ms (or on a message)
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(dead) do redis.call('HDEL', KEYS[3], id) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local wo = redis.call('HGET', KEYS[1], 'owner')
if wo and wo ~= ARGV[1] then return {0, redis.call('PTTL', KEYS[1])} end
if not wo and redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0 then
  local w = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  if #w > 0 then return {0, tonumber(w[2]) - now} end
end
redis.call('HINCRBY', KEYS[3], ARGV[1], 1)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
return {1, 0}
