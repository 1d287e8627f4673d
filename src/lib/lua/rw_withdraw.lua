-- rw_withdraw.lua: a writer that stops waiting withdraws its intent (see
-- rw_read_acquire.lua) and, if it had one, wakes the readers it held back.
-- KEYS[1]  zset waiting-writer owner -> intent expiry (ms)
-- ARGV[1]  owner   ARGV[2] channel
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH (sharded, on a Cluster)
-- Returns 1 if an intent was withdrawn, else 0
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call(ARGV[3], ARGV[2], 'intent')
return 1
