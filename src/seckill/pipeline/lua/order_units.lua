-- order_units.lua: moves an order's units between Redis's stock and its
-- buyer exactly once. The SADD on the gate set is the once-only gate: a
-- second caller (a retry, another worker) finds the id there and changes
-- nothing. Four directions, one script (release.c):
--   back (a cancelled order; gate {c:<id>}:released): stock += qty, the
--     buyer's units -= qty (dropped at 0), the order's pre-persistence
--     status (its field of {c:<id>}:order_status, or the order hash an
--     earlier version wrote) gets the final status, "restock" is published;
--   hold (a tentative database-path order once Redis is back; gate
--     {c:<id>}:mirrored): the buyer's units += qty, stock untouched (the
--     order sold a reserve unit, which Redis's stock never counted), so
--     Redis holds the buyer to the limit before it sells again;
--   out (a database-path order persisted before the reserve existed;
--     gate {c:<id>}:mirrored): stock -= qty, the buyer's units += qty;
--   drop (a tentative order refused at finalisation; gate
--     {c:<id>}:dropped): the buyer's units -= qty (dropped at 0).
-- Every key is of one bucket T of the campaign, the home bucket of the
-- order's user ({c:<id>} for K = 1; buckets.h), where the buyer's record is.
-- KEYS[1] gate set of order ids   KEYS[2] {c:<id>}:stock
-- KEYS[3] {c:<id>}:buyers (user -> units)
-- back only: KEYS[4] {c:<id>}:order:<order_id> (an earlier version's; may be absent)
--            KEYS[5] {c:<id>}:events (pub/sub channel)
--            KEYS[6] {c:<id>}:order_status (hash order id -> "user\nqty[\nstatus]")
-- ARGV[1] order id, ARGV[2] user, ARGV[3] qty (> 0),
-- ARGV[4] "back", "hold", "out" or "drop", ARGV[5] final status (back only)
-- Returns 1 when the units moved now, 0 when they already had.
local qty = tonumber(ARGV[3])
if not qty or qty <= 0 then
  return redis.error_reply('ERR bad qty')
end
local dir = ARGV[4]
if dir ~= 'back' and dir ~= 'hold' and dir ~= 'out' and dir ~= 'drop' then
  return redis.error_reply('ERR bad direction')
end
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if dir == 'hold' or dir == 'out' then
  if dir == 'out' then
    redis.call('DECRBY', KEYS[2], qty)
  end
  redis.call('HINCRBY', KEYS[3], ARGV[2], qty)
  return 1
end
if dir == 'back' then
  redis.call('INCRBY', KEYS[2], qty)
end
local left = redis.call('HINCRBY', KEYS[3], ARGV[2], -qty)
if left <= 0 then
  redis.call('HDEL', KEYS[3], ARGV[2])
end
if dir == 'drop' then
  return 1
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('HSET', KEYS[4], 'status', ARGV[5])
end
local st = redis.call('HGET', KEYS[6], ARGV[1])
if st then
  redis.call('HSET', KEYS[6], ARGV[1], string.match(st, '^[^\n]*\n[^\n]*') .. '\n' .. ARGV[5])
end
redis.call('PUBLISH', KEYS[5], 'restock')
return 1
