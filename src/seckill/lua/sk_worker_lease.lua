-- sk_worker_lease.lua: takes or renews the order-id worker lease
-- seckill:worker:<n> for this instance (SET NX PX when free, PEXPIRE when
-- already ours). Another instance's lease is never touched.
-- KEYS[1] seckill:worker:<n>   ARGV[1] instance id   ARGV[2] lease ms
-- Returns 1 when the lease is ours (for ARGV[2] ms from now), 0 otherwise.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
