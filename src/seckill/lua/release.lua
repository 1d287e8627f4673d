-- release.lua: gives a cancelled order's units back to Redis exactly once.
-- The SADD on the released set is the once-only gate: a second caller (a
-- retry, another worker) finds the id there and changes nothing.
-- KEYS[1] {c:<id>}:released   set of released order ids
-- KEYS[2] {c:<id>}:stock      remaining units
-- KEYS[3] {c:<id>}:buyers     user -> units bought
-- KEYS[4] {c:<id>}:order:<order_id>  pre-persistence order hash (may be absent)
-- KEYS[5] {c:<id>}:events     pub/sub channel; receives "restock"
-- ARGV[1] order id, ARGV[2] user, ARGV[3] qty (> 0), ARGV[4] final status
-- Returns 1 when the units went back now, 0 when they already had.
local qty = tonumber(ARGV[3])
if not qty or qty <= 0 then
  return redis.error_reply('ERR bad qty')
end
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('INCRBY', KEYS[2], qty)
local left = redis.call('HINCRBY', KEYS[3], ARGV[2], -qty)
if left <= 0 then
  redis.call('HDEL', KEYS[3], ARGV[2])
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('HSET', KEYS[4], 'status', ARGV[4])
end
redis.call('PUBLISH', KEYS[5], 'restock')
return 1
