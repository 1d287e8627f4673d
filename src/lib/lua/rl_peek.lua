-- rl_peek.lua: reports a GCRA bucket's state without taking tokens.
-- KEYS[1]  bucket key
-- ARGV[1]  emission interval in microseconds
-- ARGV[2]  burst
-- Returns {available_tokens, ms_until_full}
local t = redis.call('TIME') -- server clock; each script reads it itself (docs/locks.md, Scripts)
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then return {burst, 0} end
local avail = math.floor((burst * interval - (tat - now)) / interval)
if avail < 0 then avail = 0 end
return {avail, math.ceil((tat - now) / 1000)}
