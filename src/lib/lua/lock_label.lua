-- lock_label.lua: replaces the label of a holder (dlock_lock_set_label,
-- an election's proclaim), owner-checked, then wakes waiters and observers.
-- KEYS[1] lock key, KEYS[2] its label key (same hash slot)
-- ARGV[1] owner (simple: token; reentrant: hash field), ARGV[2] label,
-- ARGV[3] the lock's unlock channel, ARGV[4] publish command: PUBLISH, or
-- SPUBLISH (sharded, on a Cluster)
-- Returns 1 written (the label key lives as long as the lock key; its ""
-- field, the hold's fence, is kept); 0 the lock is not held by this owner
-- (nothing written).
local ty = redis.call('type', KEYS[1]).ok
local mine = (ty == 'string' and redis.call('get', KEYS[1]) == ARGV[1]) or
             (ty == 'hash' and redis.call('hexists', KEYS[1], ARGV[1]) == 1)
if not mine then return 0 end
local fence = redis.call('exists', KEYS[2]) == 1 and redis.call('hget', KEYS[2], '')
redis.call('del', KEYS[2])
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
if fence then redis.call('hset', KEYS[2], '', fence) end
local pttl = redis.call('pttl', KEYS[1])
if pttl > 0 then redis.call('pexpire', KEYS[2], pttl) end
redis.call(ARGV[4], ARGV[3], 'label')
return 1
