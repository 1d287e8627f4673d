-- reserve_handback.lua: gives a campaign's unsold database reserve to
-- Redis's stock exactly once per handback id. The database recorded the
-- handback (id, units) in the transaction that emptied the reserve; this
-- script is the Redis half, run by the persister after that commit, again
-- by the next pass after a crash in between, and by the barrier on a new
-- master that lost it. The SADD of the id is the once-only gate.
-- KEYS[1] {c:<id>}:handbacks (set of applied handback ids)
-- KEYS[2] {c:<id>}:stock   KEYS[3] {c:<id>}:events (pub/sub channel)
-- ARGV[1] handback id   ARGV[2] units (> 0)
-- Returns 1 when the stock grew now, 0 when this id was applied before.
local units = tonumber(ARGV[2])
if not units or units <= 0 then
  return redis.error_reply('ERR bad units')
end
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('INCRBY', KEYS[2], units)
redis.call('PUBLISH', KEYS[3], 'restock')
return 1
