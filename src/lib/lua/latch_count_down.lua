-- latch_count_down.lua: decrements a countdown latch; at zero the key is
-- deleted and every awaiting client is woken.
-- KEYS[1]  latch counter (string)
-- ARGV[1]  channel to publish on at zero
-- ARGV[2]  publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns the count after this call (0 when open), or -1 if the latch was
-- not set (already open or never set: nothing changed)
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local n = redis.call('DECR', KEYS[1])
if n > 0 then return n end
redis.call('DEL', KEYS[1])
redis.call(ARGV[2], ARGV[1], 'open')
return 0
