-- dead_letter.lua: moves one stream entry to the campaign's dead-letter
-- stream, atomically (a script rather than MULTI/EXEC, so a Cluster
-- client routes it by its keys like every other campaign command). The
-- keys are one bucket's ({T} = {c:<id>}, or a bucket's tag of a sharded
-- campaign: its dead letters stay in its slot).
-- KEYS[1] {T}:orders:dead  KEYS[2] {T}:orders
-- KEYS[3] {T}:orders:errors  KEYS[4] {T}:pipeline
-- ARGV[1] consumer group  ARGV[2] entry id  then name/value pairs of the
-- dead entry (entry_id, error, deliveries, the entry's own fields)
-- Returns the dead entry's id.
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
local id = redis.call('XADD', KEYS[1], '*', unpack(fields))
redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2])
redis.call('HINCRBY', KEYS[4], 'dead', 1)
return id
