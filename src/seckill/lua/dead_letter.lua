-- dead_letter.lua: moves one stream entry to the campaign's dead-letter
-- stream, atomically (a script rather than MULTI/EXEC, so a Cluster
-- client routes it by its keys like every other campaign command).
-- KEYS[1] {c:<id>}:orders:dead  KEYS[2] {c:<id>}:orders
-- KEYS[3] {c:<id>}:orders:errors  KEYS[4] {c:<id>}:pipeline
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
