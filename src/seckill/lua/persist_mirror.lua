-- persist_mirror.lua: takes the units of an order decided by the degraded
-- database path (Redis was down) out of Redis once Redis is back, so that
-- Redis's stock and buyers agree with the database again. The SADD on the
-- mirrored set is the once-only gate.
-- KEYS[1] {c:<id>}:mirrored   set of order ids already mirrored
-- KEYS[2] {c:<id>}:stock      remaining units (may go below 0 if Redis sold
--                             the same units meanwhile: the database guard
--                             rejects those; reconcile shows them)
-- KEYS[3] {c:<id>}:buyers     user -> units
-- ARGV[1] order id, ARGV[2] user, ARGV[3] qty (> 0)
-- Returns 1 when applied now, 0 when it already was.
local qty = tonumber(ARGV[3])
if not qty or qty <= 0 then
  return redis.error_reply('ERR bad qty')
end
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('DECRBY', KEYS[2], qty)
redis.call('HINCRBY', KEYS[3], ARGV[2], qty)
return 1
