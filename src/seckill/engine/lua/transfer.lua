-- transfer.lua: moves units of a sharded campaign's stock from one bucket
-- to another (docs/seckill.md, "Transfers"). A move is two calls on two
-- slots, so it is journalled: "take" records the transfer id on the source
-- in the same call that deducts, "give" applies an id once on the
-- destination (its gate set), "done" forgets the journal entry once the
-- give is known to be durable, and "stale" lists entries a crashed or
-- stalled mover left, for recovery to give again. A unit is always in
-- exactly one place: a bucket's stock, or a journal entry whose id the
-- destination's gate does not hold yet (in transit).
--
-- mode "take" (on the source bucket S):
--   KEYS[1] {S}:stock  KEYS[2] {S}:xfer (journal: id -> "dst\nunits\nts_ms")
--   KEYS[3] {S}:xin (the source's own gate set: its size is read, the
--   count of transfers ever given to S)
--   ARGV[1] "take"  ARGV[2] transfer id  ARGV[3] destination bucket index
--   ARGV[4] units wanted (0: only probe)
--   Takes n = min(stock, max(wanted, floor(stock / 2))) when wanted > 0
--   (half of a richer bucket, so a drained bucket is refilled in few moves).
--   Returns {n, stock after, journal entries, gate size}.
-- mode "give" (on the destination bucket D):
--   KEYS[1] {D}:stock  KEYS[2] {D}:xin  KEYS[3] {D}:events (pub/sub)
--   ARGV[1] "give"  ARGV[2] transfer id  ARGV[3] units (> 0)
--   Returns {1 applied now | 0 applied before, stock after}.
-- mode "done" (on S): KEYS[1] {S}:xfer  ARGV[1] "done"  ARGV[2] id -> 0/1
-- mode "stale" (on S): KEYS[1] {S}:xfer  ARGV[1] "stale"  ARGV[2] age ms
--   Returns {id, dst, units, ...} of entries older than age (Redis clock).
local mode = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
if mode == 'take' then
  local want = tonumber(ARGV[4])
  local dst = tonumber(ARGV[3])
  if not want or want < 0 or not dst or dst < 0 then return redis.error_reply('ERR bad take') end
  local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
  local n = 0
  if want > 0 and stock > 0 then
    n = math.max(want, math.floor(stock / 2))
    if n > stock then n = stock end
    if redis.call('HSETNX', KEYS[2], ARGV[2], dst .. '\n' .. n .. '\n' .. now_ms()) == 0 then
      return redis.error_reply('ERR transfer id reused')
    end
    stock = redis.call('DECRBY', KEYS[1], n)
  end
  return {n, stock, redis.call('HLEN', KEYS[2]), redis.call('SCARD', KEYS[3])}
elseif mode == 'give' then
  local units = tonumber(ARGV[3])
  if not units or units <= 0 then return redis.error_reply('ERR bad units') end
  if redis.call('SADD', KEYS[2], ARGV[2]) == 0 then
    return {0, tonumber(redis.call('GET', KEYS[1]) or '0')}
  end
  local stock = redis.call('INCRBY', KEYS[1], units)
  redis.call('PUBLISH', KEYS[3], 'restock')
  return {1, stock}
elseif mode == 'done' then
  return redis.call('HDEL', KEYS[1], ARGV[2])
elseif mode == 'stale' then
  local age = tonumber(ARGV[2])
  if not age then return redis.error_reply('ERR bad age') end
  local now, out = now_ms(), {}
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local dst, units, ts = string.match(all[i + 1], '^(%d+)\n(%d+)\n(%d+)$')
    if dst and now - tonumber(ts) >= age then
      out[#out + 1] = all[i]; out[#out + 1] = tonumber(dst); out[#out + 1] = tonumber(units)
    end
  end
  return out
end
return redis.error_reply('ERR bad mode')
