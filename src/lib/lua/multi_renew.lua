-- multi_renew.lua: watchdog renewal of several owner-count lock hashes.
-- KEYS[1..n]  lock hashes   ARGV[1] owner   ARGV[2] lease ms
-- Returns the number of KEYS the owner no longer holds (0 = all renewed)
local function mine(k) return redis.call('TYPE', k).ok == 'hash' and redis.call('HEXISTS', k, ARGV[1]) == 1 end
local missing = 0
for _, k in ipairs(KEYS) do
  if mine(k) then
    redis.call('PEXPIRE', k, ARGV[2])
  else
    missing = missing + 1
  end
end
return missing
