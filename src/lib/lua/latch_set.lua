-- latch_set.lua: arms a countdown latch only if it is not armed already.
-- KEYS[1]  latch counter (string)
-- ARGV[1]  count (>= 1)   ARGV[2] expiry ms (0: none)
-- Returns 1 armed, 0 already armed (nothing changed)
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
