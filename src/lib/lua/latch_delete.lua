-- latch_delete.lua: opens a countdown latch whatever its count and wakes
-- every awaiting client.
-- KEYS[1]  latch counter (string)
-- ARGV[1]  channel to publish on
-- ARGV[2]  publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns 1 if the latch was armed, 0 if it was already open
local n = redis.call('DEL', KEYS[1])
redis.call(ARGV[2], ARGV[1], 'open')
return n
