-- multi_acquire.lua: all-or-nothing acquisition of several reentrant locks
-- (each an {owner: count} hash with PEXPIRE, the reentrant lock layout).
-- All KEYS must share one hash slot; the cross-slot path calls this once per
-- key in a fixed order and rolls back with multi_release.lua.
-- KEYS[1..n]  lock hashes
-- ARGV[1]  owner   ARGV[2] lease ms
-- Returns {1, 0, 0}          all acquired (or re-entered)
--         {0, i, pttl_ms}    KEYS[i] is held by another owner; nothing changed
local function mine(k) return redis.call('TYPE', k).ok == 'hash' and redis.call('HEXISTS', k, ARGV[1]) == 1 end
for i, k in ipairs(KEYS) do
  if redis.call('EXISTS', k) == 1 and not mine(k) then
    return {0, i, redis.call('PTTL', k)}
  end
end
for _, k in ipairs(KEYS) do
  redis.call('HINCRBY', k, ARGV[1], 1)
  redis.call('PEXPIRE', k, ARGV[2])
end
return {1, 0, 0}
