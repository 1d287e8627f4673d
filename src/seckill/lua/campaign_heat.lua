-- campaign_heat.lua: pre-heats a campaign into Redis (meta, stock).
-- mode "create": refused if the campaign exists. mode "reheat": rewrites
-- meta and sets stock = max(0, stock - units held by buyers); refused while
-- the campaign is live (server clock inside [starts, ends)) unless mode is
-- "force". Never resets what buyers hold, so a re-heat cannot oversell.
-- KEYS[1] {c:<id>}:meta  KEYS[2] {c:<id>}:stock  KEYS[3] {c:<id>}:buyers
-- ARGV[1] mode  ARGV[2] title  ARGV[3] stock  ARGV[4] per_user_limit
-- ARGV[5] starts_at_ms  ARGV[6] ends_at_ms  ARGV[7] price_cents
-- Returns {0, remaining} | {-1, 0} exists | {-2, 0} live (not forced)
local mode = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and mode == 'create' then return {-1, 0} end
if exists and mode == 'reheat' then
  local w = redis.call('HMGET', KEYS[1], 'starts_at_ms', 'ends_at_ms')
  if now >= tonumber(w[1]) and now < tonumber(w[2]) then return {-2, 0} end
end
local remaining = tonumber(ARGV[3])
local held = redis.call('HVALS', KEYS[3])
for _, v in ipairs(held) do remaining = remaining - tonumber(v) end
if remaining < 0 then remaining = 0 end
redis.call('HSET', KEYS[1], 'title', ARGV[2], 'stock', ARGV[3], 'per_user_limit', ARGV[4],
           'starts_at_ms', ARGV[5], 'ends_at_ms', ARGV[6], 'price_cents', ARGV[7],
           'created_at_ms', tostring(now))
redis.call('SET', KEYS[2], remaining)
return {0, remaining}
