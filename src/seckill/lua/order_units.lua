-- order_units.lua: moves an order's units between Redis's stock and its
-- buyer exactly once. The SADD on the gate set is the once-only gate: a
-- second caller (a retry, another worker) finds the id there and changes
-- nothing. Two directions, one script (release.c):
--   give back (a cancelled order; gate {c:<id>}:released): stock += qty,
--     the buyer's units -= qty (dropped at 0), the pre-persistence order
--     hash gets the final status, "restock" is published;
--   take out (a degraded-path order once Redis is back; gate
--     {c:<id>}:mirrored): stock -= qty, the buyer's units += qty, so Redis
--     agrees with the database again. The stock may go below 0 if Redis
--     sold the same units meanwhile: the database guard rejects those and
--     reconcile shows them.
-- KEYS[1] gate set of order ids ({c:<id>}:released or {c:<id>}:mirrored)
-- KEYS[2] {c:<id>}:stock      KEYS[3] {c:<id>}:buyers (user -> units)
-- give back only: KEYS[4] {c:<id>}:order:<order_id> (may be absent)
--                 KEYS[5] {c:<id>}:events (pub/sub channel)
-- ARGV[1] order id, ARGV[2] user, ARGV[3] qty (> 0),
-- ARGV[4] "back" or "out", ARGV[5] final status (give back only)
-- Returns 1 when the units moved now, 0 when they already had.
local qty = tonumber(ARGV[3])
if not qty or qty <= 0 then
  return redis.error_reply('ERR bad qty')
end
local back = ARGV[4] == 'back'
if not back and ARGV[4] ~= 'out' then
  return redis.error_reply('ERR bad direction')
end
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if not back then
  redis.call('DECRBY', KEYS[2], qty)
  redis.call('HINCRBY', KEYS[3], ARGV[2], qty)
  return 1
end
redis.call('INCRBY', KEYS[2], qty)
local left = redis.call('HINCRBY', KEYS[3], ARGV[2], -qty)
if left <= 0 then
  redis.call('HDEL', KEYS[3], ARGV[2])
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('HSET', KEYS[4], 'status', ARGV[5])
end
redis.call('PUBLISH', KEYS[5], 'restock')
return 1
