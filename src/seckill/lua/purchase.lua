-- purchase.lua: decides N purchases of one campaign atomically and in
-- order (a batch of N behaves exactly like N calls of one). Per purchase:
-- rate limits, Idempotency-Key replay, quantity bound, time window (Redis
-- server clock), per-user limit, stock; on acceptance it deducts, records
-- the buyer, the order hash, the idempotency answer, and XADDs the order.
-- KEYS are those of one bucket of the campaign ({T}: the bucket's hash
-- tag, {c:<id>} for bucket 0 and for every one-bucket campaign;
-- docs/seckill.md "One hot campaign over many masters"):
-- KEYS[1] {T}:meta   KEYS[2] {T}:stock   KEYS[3] {T}:buyers   KEYS[4] {T}:orders
-- then 4 keys per purchase i (k = 4 + 4*(i-1)):
--   KEYS[k+1] idempotency key ({T}:idem:<key>, a hash: one answer per user;
--     ignored when no key)
--   KEYS[k+2] order hash ({T}:order:<order_id>)
--   KEYS[k+3] user rate key   KEYS[k+4] ip rate key
-- ARGV[1] campaign id   ARGV[2] N
-- ARGV[3] user rate limit (0 = off)  ARGV[4] user rate window ms
-- ARGV[5] ip rate limit (0 = off)    ARGV[6] ip rate window ms
-- ARGV[7] idempotency ttl ms         ARGV[8] order hash ttl ms
-- ARGV[9] run id of the connected server (INFO server); "" (Cluster: the
--   engine does not know which node serves the slot) reads this node's own
-- ARGV[10] the number of buckets K the engine routed by (every purchase
--   here has this bucket as its user's home bucket among K)
-- then 6 per purchase i (a = 10 + 6*(i-1)):
--   ARGV[a+1] order id (decimal)  ARGV[a+2] user  ARGV[a+3] quantity
--   ARGV[a+4] Idempotency-Key or ""  ARGV[a+5] client ip or ""
--   ARGV[a+6] "1" when the purchase is sent again after a transfer (its
--     rate limits were counted the first time), else ""
-- Returns a flat array, 4 entries per purchase: code, value, order id, qty.
-- The codes are named by their outcome labels, the rows of the C table in
-- src/seckill/outcome.c (a unit test checks that both say the same):
--   accepted             value = remaining stock (of this bucket)
--   replay               value = remaining at the first answer; order id/qty of it
--                        (the answer the engine acknowledges like an acceptance)
--   sold_out             value = remaining stock (0, or less than qty)
--   limit_reached        value = units the user already holds
--   not_started          value = ms until the start
--   ended                value = 0
--   not_found            (campaign not pre-heated)
--   rate_limited         value = ms until the window resets
--   bad_quantity         value = per-user limit (qty below 1 or above the limit)
--   idempotency_conflict (an answer under the user's field names another
--                        user: never written so, kept as a guard)
--   barrier              (meta.runid missing or not ARGV[9]; every purchase)
-- and two the engine acts on, never a buyer's answer (ROUTE below):
--   reroute              value = the meta's K: the engine routed by another
--                        K (it had not read the layout yet); every purchase
--   short                value = this bucket's stock: too little here, but a
--                        campaign of K > 1 may have units in another bucket;
--                        the engine moves units here and sends it again
--   confirmed            a replay (values as replay) whose answer the
--                        persister marked: the database holds its order, so
--                        the engine answers it 201 without an acknowledgement
-- An Idempotency-Key is scoped to (user, campaign), whatever K: the key's
-- hash holds one answer per user (field = user), so the same user replays
-- and another user's use of the same key is decided on its own. The answer
-- is "user\norder_id\nqty\nremaining", with "\nc" appended once the
-- database holds the order (idem_confirm.lua, barrier_mirror.lua). A key
-- still kept as a string (one answer, written before) becomes the hash of
-- its one user when read.
-- not_found, barrier and reroute write nothing (no meta is created).
local CODE = {accepted = 0, replay = 1, sold_out = 2, limit_reached = 3, not_started = 4, ended = 5,
              not_found = 6, rate_limited = 7, bad_quantity = 8, idempotency_conflict = 9,
              barrier = 10}
local ROUTE = {reroute = 11, short = 12, confirmed = 13}
local meta = redis.call('HMGET', KEYS[1], 'per_user_limit', 'starts_at_ms', 'ends_at_ms', 'runid', 'epoch',
                        'shards')
local n = tonumber(ARGV[2])
local out = {}
local runid = ARGV[9]
if runid == '' then runid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') end
local shards = tonumber(meta[6] or '1')
if not meta[1] or meta[4] ~= runid or shards ~= tonumber(ARGV[10]) then
  local code, value = CODE.not_found, 0
  if meta[1] then
    if shards ~= tonumber(ARGV[10]) then code, value = ROUTE.reroute, shards else code = CODE.barrier end
  end
  for i = 1, n do
    local a = 10 + 6 * (i - 1)
    out[#out + 1] = code; out[#out + 1] = value; out[#out + 1] = ARGV[a + 1]; out[#out + 1] = tonumber(ARGV[a + 3])
  end
  return out
end
redis.call('HINCRBY', KEYS[1], 'calls', 1)
local epoch = meta[5] or '1'
local limit = tonumber(meta[1])
local starts = tonumber(meta[2])
local ends = tonumber(meta[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_str = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
local stock0 = stock
local cid = ARGV[1]
local user_rl, user_win = tonumber(ARGV[3]), tonumber(ARGV[4])
local ip_rl, ip_win = tonumber(ARGV[5]), tonumber(ARGV[6])
local idem_ttl, order_ttl = ARGV[7], ARGV[8]

-- Fixed-window counter on server time; returns ms to wait, or 0 if allowed.
local function over_rate(key, lim, win)
  if lim <= 0 then return 0 end
  local c = redis.call('INCR', key)
  local ttl = redis.call('PTTL', key)
  if c == 1 or ttl < 0 then
    redis.call('PEXPIRE', key, win)
    ttl = win
  end
  if c > lim then return ttl > 0 and ttl or 1 end
  return 0
end

-- The answer the user got under the key, or nil.
local function idem_answer(key, user)
  if redis.call('TYPE', key).ok == 'string' then
    local v, ttl = redis.call('GET', key), redis.call('PTTL', key)
    redis.call('DEL', key)
    redis.call('HSET', key, string.match(v, '^[^\n]*'), v)
    if ttl > 0 then redis.call('PEXPIRE', key, ttl) end
  end
  return redis.call('HGET', key, user) or nil
end

local function answer(code, value, oid, qty)
  out[#out + 1] = code; out[#out + 1] = value; out[#out + 1] = oid; out[#out + 1] = qty
end

for i = 1, n do
  local k = 4 + 4 * (i - 1)
  local a = 10 + 6 * (i - 1)
  local oid, user, qty, idem, ip = ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]), ARGV[a + 4], ARGV[a + 5]
  local wait = 0
  if ARGV[a + 6] ~= '1' then
    wait = over_rate(KEYS[k + 3], user_rl, user_win)
    if wait == 0 and ip ~= '' then wait = over_rate(KEYS[k + 4], ip_rl, ip_win) end
  end
  local first = (idem ~= '') and idem_answer(KEYS[k + 1], user) or nil
  if wait > 0 then
    answer(CODE.rate_limited, wait, oid, qty)
  elseif first then
    local fu, foid, fqty, frem, mark = string.match(first, '^([^\n]*)\n(%d+)\n(%d+)\n(%d+)\n?(c?)$')
    if fu == user then answer(mark == 'c' and ROUTE.confirmed or CODE.replay, tonumber(frem), foid, tonumber(fqty))
    else answer(CODE.idempotency_conflict, 0, oid, qty) end
  elseif qty < 1 or qty > limit then
    answer(CODE.bad_quantity, limit, oid, qty)
  elseif now < starts then
    answer(CODE.not_started, starts - now, oid, qty)
  elseif now >= ends then
    answer(CODE.ended, 0, oid, qty)
  else
    local held = tonumber(redis.call('HGET', KEYS[3], user) or '0')
    if held + qty > limit then
      answer(CODE.limit_reached, held, oid, qty)
    elseif stock < qty then
      answer(shards > 1 and ROUTE.short or CODE.sold_out, stock, oid, qty)
    else
      stock = stock - qty
      redis.call('HINCRBY', KEYS[3], user, qty)
      redis.call('HSET', KEYS[k + 2], 'campaign', cid, 'user', user, 'qty', qty,
                 'status', 'accepted', 'ts_ms', now_str)
      redis.call('PEXPIRE', KEYS[k + 2], order_ttl)
      if idem ~= '' then
        redis.call('HSET', KEYS[k + 1], user, user .. '\n' .. oid .. '\n' .. qty .. '\n' .. stock)
        redis.call('PEXPIRE', KEYS[k + 1], idem_ttl)
      end
      redis.call('XADD', KEYS[4], '*', 'order_id', oid, 'campaign', cid, 'user', user,
                 'qty', tostring(qty), 'idem', idem, 'ts_ms', now_str, 'path', 'redis',
                 'epoch', epoch)
      answer(CODE.accepted, stock, oid, qty)
    end
  end
end
if stock ~= stock0 then redis.call('SET', KEYS[2], stock) end
return out
