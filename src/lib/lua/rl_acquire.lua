-- rl_acquire.lua: GCRA rate limiter step on the Redis server's clock.
-- One key per limited subject holds its theoretical arrival time (TAT, in
-- microseconds of server time); no client clock is ever read.
-- KEYS[1]  bucket key (string, expires when the bucket is full again)
-- ARGV[1]  emission interval in microseconds (period / rate, may be fractional)
-- ARGV[2]  burst: tokens a full bucket holds (>= 1)
-- ARGV[3]  n: tokens wanted (>= 1)
-- Returns {1, remaining}  allowed; remaining tokens after this call
--         {0, wait_ms}    refused; earliest retry that can succeed
--         {-1, 0}         n > burst: can never be allowed
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
if n > burst then return {-1, 0} end
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
local new_tat = tat + n * interval
local allow_at = new_tat - burst * interval
if allow_at > now then
  return {0, math.ceil((allow_at - now) / 1000)}
end
redis.call('SET', KEYS[1], string.format('%.3f', new_tat),
           'PX', math.ceil((new_tat - now) / 1000) + 1)
return {1, math.floor((burst * interval - (new_tat - now)) / interval)}
