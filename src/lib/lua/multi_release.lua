-- multi_release.lua: leaves one level of each lock the owner holds; a lock
-- whose count reaches zero is deleted and its unlock channel gets a
-- message: Redisson's name for it, "redisson_lock__channel:{key}", or
-- "redisson_lock__channel:key" when key already has a '{' (as
-- dlock__redisson_channel in src/lib/client.c).
-- KEYS[1..n]  lock hashes
-- ARGV[1]  owner   ARGV[1+i] publish command for KEYS[i]'s channel: PUBLISH,
--          or SPUBLISH (sharded, on a Cluster, when the channel is in KEYS[i]'s slot)
-- Returns the number of KEYS the owner did not hold (0 = all released)
local function mine(k) return redis.call('TYPE', k).ok == 'hash' and redis.call('HEXISTS', k, ARGV[1]) == 1 end
local missing = 0
for i, k in ipairs(KEYS) do
  if not mine(k) then
    missing = missing + 1
  elseif redis.call('HINCRBY', k, ARGV[1], -1) <= 0 then
    redis.call('DEL', k)
    local ch = string.find(k, '{', 1, true) and k or ('{' .. k .. '}')
    redis.call(ARGV[1 + i], 'redisson_lock__channel:' .. ch, 0)
  end
end
return missing
