-- sk_worker_lease.lua: takes or renews the order-id worker lease
-- seckill:worker:<n> for this instance. The lease's value is
-- "<instance>:<fence>", where fence is a fencing token INCRed at every
-- take ({seckill:worker:<n>}:fence: its hash tag is the lease key's whole
-- name, so both live in one Cluster slot), so a renewal succeeds only for the very
-- lease it renews: an instance paused past its lease whose worker id was
-- taken (and maybe freed again) meanwhile finds a different value and
-- must take a lease anew. Another instance's lease is never touched.
-- KEYS[1] seckill:worker:<n>   KEYS[2] {seckill:worker:<n>}:fence
-- ARGV[1] instance id   ARGV[2] lease ms   ARGV[3] fence to renew ("0": take)
-- Returns {fence, server_ms}: fence > 0 when the lease is ours (for
-- ARGV[2] ms from now), 0 otherwise; server_ms is the server's clock (a
-- new holder issues no id below it: see engine_lease.c).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('GET', KEYS[1])
if ARGV[3] ~= '0' then
  if v == ARGV[1] .. ':' .. ARGV[3] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {tonumber(ARGV[3]), now}
  end
  return {0, now}
end
if v then return {0, now} end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. fence, 'PX', ARGV[2])
return {fence, now}
