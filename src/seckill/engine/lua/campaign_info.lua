-- campaign_info.lua: a consistent snapshot of one campaign for GET
-- /v1/campaigns/{id}: server time, remaining stock and the meta hash.
-- KEYS[1] {c:<id>}:meta  KEYS[2] {c:<id>}:stock
-- Returns {now_ms (string), remaining (-1 if missing), field, value, ...}
-- or {now_ms, -1} alone when the campaign does not exist.
local t = redis.call('TIME')
local now = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
local meta = redis.call('HGETALL', KEYS[1])
local out = {now, tonumber(redis.call('GET', KEYS[2]) or '-1')}
for _, v in ipairs(meta) do out[#out + 1] = v end
return out
