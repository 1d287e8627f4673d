-- lock_acquire.lua: simple lock acquire (redis-py Lock / redlock layout):
-- SET key token NX PX lease, plus the fencing token for a new holder.
-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] (optional) label key (all
-- in KEYS[1]'s hash slot)
-- ARGV[1] token, ARGV[2] lease ms, ARGV[3] fence key expiry ms (set when the
-- counter is seeded; once it expires the next acquisition reseeds it),
-- ARGV[4] (optional, with KEYS[3]) the holder's label: the label key
-- becomes the hash {token: label, "": this hold's fence} with the lock's
-- lease (docs/locks.md, "Holder labels"; the fence stays readable after
-- the fence key expired); the lock key's layout does not change
-- Returns {1, fence} acquired (also when K already holds this token: the
-- current fence is returned); {0, pttl} held by someone else
-- (pttl -1: the holder set no expiry).
-- Fence = last + 1 while the fence key lives (INCR), else the server TIME
-- in microseconds: strictly increasing across release, expiry and loss of
-- the keys under the assumption in docs/locks.md.
local function label(fence)
  if KEYS[3] and ARGV[4] then
    redis.call('del', KEYS[3])
    redis.call('hset', KEYS[3], ARGV[1], ARGV[4], '', fence)
    redis.call('pexpire', KEYS[3], ARGV[2])
  end
end
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.pcall('get', KEYS[1]) == ARGV[1] then
    -- already ours (an earlier attempt whose reply was lost, or a holder
    -- resuming with its token): keep its fence
    redis.call('pexpire', KEYS[1], ARGV[2])
    local f = (KEYS[3] and redis.call('exists', KEYS[3]) == 1 and redis.call('hget', KEYS[3], '')) or
              redis.call('get', KEYS[2]) or '0'
    label(f)
    return {1, tonumber(f) or 0}
  end
  return {0, redis.call('pttl', KEYS[1])}
end
local fence = redis.call('incr', KEYS[2])
if fence == 1 then -- no fence key (first use, expired or lost): seed from the clock
  local t = redis.call('time')
  fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('set', KEYS[2], string.format('%.0f', fence), 'PX', ARGV[3])
end
label(string.format('%.0f', fence))
return {1, fence}
