-- fair_renew.lua: watchdog renewal of an owner-count lock hash.
-- KEYS[1]  lock hash   ARGV[1] owner   ARGV[2] lease ms
-- Returns 1 renewed, 0 the owner no longer holds it
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' or
   redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
