-- purchase.lua: decides N purchases of one campaign atomically and in
-- order (a batch of N behaves exactly like N calls of one). Per purchase:
-- rate limits, Idempotency-Key replay, quantity bound, time window (Redis
-- server clock), per-user limit, stock; on acceptance it deducts, records
-- the buyer, the order's status, the idempotency answer, and XADDs the
-- order. The buyers' and the statuses' writes of the whole batch are one
-- HSET each at the end (the script is atomic: nothing reads them in
-- between), so an accepted purchase costs one XADD of its own.
-- KEYS are those of one bucket of the campaign ({T}: the bucket's hash
-- tag, {c:<id>} for bucket 0 and for every one-bucket campaign;
-- docs/seckill.md "One hot campaign over many masters"):
-- KEYS[1] {T}:meta   KEYS[2] {T}:stock   KEYS[3] {T}:buyers   KEYS[4] {T}:orders
-- KEYS[5] {T}:order_status (hash order id -> "user\nqty[\nstatus]")
-- then, per purchase i in order, only the keys it uses:
--   with an Idempotency-Key: {T}:idem:<key> (a string: the answer of the
--     key's first user, as every version wrote it) and {T}:iu:<user>/<key>
--     (a string: this user's answer when the first user was another one)
--   flag 1: {T}:rl:u:<user>   flag 2: {T}:rl:ip:<addr> (rate limits counted)
-- ARGV[1] N
-- ARGV[2] user rate limit (0 = off)  ARGV[3] user rate window ms
-- ARGV[4] ip rate limit (0 = off)    ARGV[5] ip rate window ms
-- ARGV[6] idempotency ttl ms         ARGV[7] order status ttl ms (after the
--   campaign's end: the status hash expires then, never earlier)
-- ARGV[8] run id of the connected server (INFO server); "" (Cluster: the
--   engine does not know which node serves the slot) reads this node's own
-- ARGV[9] the number of buckets K the engine routed by (every purchase
--   here has this bucket as its user's home bucket among K)
-- then 4 per purchase i (a = 9 + 4*(i-1)):
--   ARGV[a+1] order id (decimal)  ARGV[a+2] user  ARGV[a+3] quantity
--   ARGV[a+4] one digit of flags (1: user rate key given, 2: ip rate key
--     given; none when it is sent again after a transfer: its rate limits
--     were counted the first time) then the Idempotency-Key, if any
-- Returns one entry per purchase, in order: the integer code + 16 * value
-- about the purchase as the engine sent it (its order id and quantity), or
-- for a replay (and confirmed) the array {code, value, order id, qty} of
-- the first answer. (An integer costs the reply one element, and the
-- engine one reply object, where four entries cost four.) A value is kept
-- within +-(2^49 - 1), so that the sum is exact in a Lua number: only a
-- start years past 9999, which the HTTP API refuses, would reach it.
-- The codes are named by their outcome labels, the rows of the C table in
-- src/seckill/base/rulebook.c (a unit test checks that both say the same):
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
--   idempotency_conflict (a user-scoped answer that names another user:
--                        never written so, kept as a guard)
--   barrier              (meta.runid missing or not ARGV[8]; every purchase)
-- and two the engine acts on, never a buyer's answer (ROUTE below):
--   reroute              value = the meta's K: the engine routed by another
--                        K (it had not read the layout yet); every purchase
--   short                value = this bucket's stock: too little here, but a
--                        campaign of K > 1 may have units in another bucket;
--                        the engine moves units here and sends it again
--   confirmed            a replay (values as replay) whose answer the
--                        persister marked: the database holds its order, so
--                        the engine answers it 201 without an acknowledgement
-- An Idempotency-Key is scoped to (user, campaign), whatever K. An answer
-- is "user\norder_id\nqty\nremaining", with "\nc" appended once the
-- database holds the order (idem_confirm.lua, barrier_mirror.lua). The
-- key's first user's answer is at {T}:idem:<key> (where every earlier
-- version reads and writes it, so instances of both versions replay each
-- other's answers); another user's is at {T}:iu:<user>/<key>.
-- The stream entry: o <order id> u <user> q <qty> e <epoch> [k <key>]; the
-- campaign is the stream's, the time the entry id's (both Redis's).
-- not_found, barrier and reroute write nothing (no meta is created).
local CODE = {accepted = 0, replay = 1, sold_out = 2, limit_reached = 3, not_started = 4, ended = 5,
              not_found = 6, rate_limited = 7, bad_quantity = 8, idempotency_conflict = 9,
              barrier = 10}
local ROUTE = {reroute = 11, short = 12, confirmed = 13}
local meta = redis.call('HMGET', KEYS[1], 'per_user_limit', 'starts_at_ms', 'ends_at_ms', 'runid', 'epoch',
                        'shards')
local n = tonumber(ARGV[1])
local out = {}
local runid = ARGV[8]
if runid == '' then runid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') end
local shards = tonumber(meta[6] or '1')
if not meta[1] or meta[4] ~= runid or shards ~= tonumber(ARGV[9]) then
  local code, value = CODE.not_found, 0
  if meta[1] then
    if shards ~= tonumber(ARGV[9]) then code, value = ROUTE.reroute, shards else code = CODE.barrier end
  end
  for i = 1, n do out[i] = code + 16 * value end -- value: 0 or K
  return out
end
-- every call that decides writes, so the WAIT behind it covers the batch,
-- also a batch of replays (docs/design/promise.md, "Acknowledgements")
redis.call('HINCRBY', KEYS[1], 'calls', 1)
local epoch = meta[5] or '1'
local limit = tonumber(meta[1])
local starts = tonumber(meta[2])
local ends = tonumber(meta[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
local stock0 = stock
local user_rl, user_win = tonumber(ARGV[2]), tonumber(ARGV[3])
local ip_rl, ip_win = tonumber(ARGV[4]), tonumber(ARGV[5])
local idem_ttl = ARGV[6]

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

-- A string answer, or nil; true second when the key holds another type
-- (never written so by a release: read as no answer, and left alone,
-- rather than failing the batch with WRONGTYPE).
local function get_answer(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'string' then return v end
  return nil, type(v) == 'table' and v.err ~= nil
end

-- The units each user of purchases from..n holds, read in one HMGET the
-- first time a purchase of the batch needs them.
local held, held_read, changed = {}, false, {}
local function read_held(from)
  local users, seen = {}, {}
  for i = from, n do
    local u = ARGV[9 + 4 * (i - 1) + 2]
    if not seen[u] then seen[u] = true; users[#users + 1] = u end
  end
  local v = redis.call('HMGET', KEYS[3], unpack(users))
  for j = 1, #users do held[users[j]] = v[j] and tonumber(v[j]) or 0 end
  held_read = true
end

local no = 0
local VMAX = 562949953421311 -- 2^49 - 1
local function answer(code, value)
  if value > VMAX then value = VMAX elseif value < -VMAX then value = -VMAX end
  no = no + 1
  out[no] = code + 16 * value
end

local statuses, ns = {}, 0
local k = 5
for i = 1, n do
  local a = 9 + 4 * (i - 1)
  -- qs: the quantity as the engine wrote it (a canonical decimal), written
  -- back as it is: a Lua number would be formatted by sprintf each time
  local oid, user, qs, fk = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local qty = qs == '1' and 1 or tonumber(qs)
  local flags = string.byte(fk, 1) - 48
  local idem = #fk > 1 and string.sub(fk, 2) or ''
  local k_first, k_user
  if idem ~= '' then k_first, k_user = KEYS[k + 1], KEYS[k + 2]; k = k + 2 end
  local wait = 0
  if flags % 2 == 1 then
    k = k + 1
    wait = over_rate(KEYS[k], user_rl, user_win)
  end
  if flags >= 2 then
    k = k + 1
    if wait == 0 then wait = over_rate(KEYS[k], ip_rl, ip_win) end
  end
  local first, own_key = nil, nil
  if idem ~= '' then
    local other
    first, other = get_answer(k_first)
    if not first or string.match(first, '^[^\n]*') ~= user then
      -- a new answer goes to the first user's name while it is free
      own_key = (first or other) and k_user or k_first
      first = get_answer(k_user)
    end
  end
  if wait > 0 then
    answer(CODE.rate_limited, wait)
  elseif first then
    local fu, foid, fqty, frem, mark = string.match(first, '^([^\n]*)\n(%d+)\n(%d+)\n(%d+)\n?(c?)$')
    if fu == user then
      no = no + 1
      out[no] = {mark == 'c' and ROUTE.confirmed or CODE.replay, tonumber(frem), foid, tonumber(fqty)}
    else answer(CODE.idempotency_conflict, 0) end
  elseif qty < 1 or qty > limit then
    answer(CODE.bad_quantity, limit)
  elseif now < starts then
    answer(CODE.not_started, starts - now)
  elseif now >= ends then
    answer(CODE.ended, 0)
  else
    if not held_read then read_held(i) end
    local h = held[user]
    if h + qty > limit then
      answer(CODE.limit_reached, h)
    elseif stock < qty then
      answer(shards > 1 and ROUTE.short or CODE.sold_out, stock)
    else
      stock = stock - qty
      held[user] = h + qty
      changed[user] = h == 0 and qs or true -- a new buyer's units are qs
      statuses[ns + 1] = oid; statuses[ns + 2] = user .. '\n' .. qs
      ns = ns + 2
      if idem ~= '' then
        redis.call('SET', own_key, user .. '\n' .. oid .. '\n' .. qs .. '\n' .. stock, 'PX', idem_ttl)
        redis.call('XADD', KEYS[4], '*', 'o', oid, 'u', user, 'q', qs, 'e', epoch, 'k', idem)
      else
        redis.call('XADD', KEYS[4], '*', 'o', oid, 'u', user, 'q', qs, 'e', epoch)
      end
      answer(CODE.accepted, stock)
    end
  end
end
if stock ~= stock0 then
  redis.call('SET', KEYS[2], stock)
  local pairs_ = {}
  local np = 0
  for u, v in pairs(changed) do
    pairs_[np + 1] = u; pairs_[np + 2] = v == true and held[u] or v
    np = np + 2
  end
  redis.call('HSET', KEYS[3], unpack(pairs_))
  redis.call('HSET', KEYS[5], unpack(statuses))
  -- the statuses live until the order status ttl after the campaign's end
  -- (at least that long after each order's decision); the expiry is only
  -- ever moved later (a re-heat may move the end)
  local until_ms = math.max(ends, now) + tonumber(ARGV[7])
  local ttl = redis.call('PTTL', KEYS[5])
  if ttl < 0 or now + ttl < until_ms then redis.call('PEXPIREAT', KEYS[5], string.format('%.0f', until_ms)) end
end
return out
