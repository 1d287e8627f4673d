-- barrier_mirror.lua: the barrier's writes on a new master
-- (docs/design/promise.md, "A barrier after every change of master"), on
-- one bucket's keys ({T} below: {c:<id>} for a K = 1 campaign, else the
-- bucket's tag; the caller gives bucket j only the orders of users whose
-- home bucket is j).
-- Idempotent: running it again, or after a crash, changes nothing more.
--
-- mode "mirror": gives the master the orders the database holds and the
-- master lacks. An order is held when its field of {c:<id>}:order_status
-- exists, or its order hash {c:<id>}:order:<oid> (written by earlier
-- versions, which may still run during a rolling upgrade), or its id is in
-- {c:<id>}:mirrored (the statuses expire; the set does not: every order
-- seen here joins it). A missing order is taken: stock -= qty for a
-- Redis-path order (a database-path order sold a reserve unit),
-- buyers[user] += qty, its status field ("user\nqty", as purchase.lua
-- writes it; the hash's expiry moved, never earlier, to the order status
-- ttl after the campaign's end), and the Idempotency-Key answer
-- "user\norder_id\nqty\nremaining" (as purchase.lua writes it; remaining =
-- the stock now), marked confirmed ("\nc", as idem_confirm.lua marks it)
-- unless refused, under the key's first user's name when it is free, else
-- under the user's own name when that is free (an answer the user already
-- has is left alone). Then the give-backs the master lost are applied
-- again, each behind its gate: a cancelled order (final "released", gate
-- {c:<id>}:released): stock += qty, buyers -= qty, status cancelled; a
-- tentative order refused at finalisation (final "dropped", gate
-- {c:<id>}:dropped): buyers -= qty. A Redis-path order taken here joins
-- {c:<id>}:carried: it is in the database but not in this master's stream,
-- which reconcile counts.
--   KEYS[1] {c:<id>}:stock  KEYS[2] {c:<id>}:buyers  KEYS[3] {c:<id>}:mirrored
--   KEYS[4] {c:<id>}:released  KEYS[5] {c:<id>}:dropped  KEYS[6] {c:<id>}:carried
--   KEYS[7] {c:<id>}:order_status  KEYS[8] {c:<id>}:meta (ends_at_ms read)
--   then 3 per order i (k = 8 + 3*(i-1)): KEYS[k+1] the order hash of
--   earlier versions, KEYS[k+2] {c:<id>}:idem:<key>, KEYS[k+3]
--   {c:<id>}:iu:<user>/<key> (any keys of the slot when no key)
--   ARGV[1] "mirror"  ARGV[2] campaign id  ARGV[3] order status ttl ms
--   ARGV[4] idempotency ttl ms
--   then 7 per order i (a = 4 + 7*(i-1)): order id, user, qty, path
--   ("redis" | "db"), idem ("" if none), ts_ms, final ("" | "released" |
--   "dropped")
--   Returns {orders taken now, give-backs applied now}.
--
-- mode "open": the campaign sells again on this master, if the caller
-- still holds the barrier lock and this node is the master the caller
-- drained (ARGV[3] is its run id: on a Cluster the slot may have moved, or
-- failed over, since): meta.runid and meta.epoch set, lock gone.
--   KEYS[1] {c:<id>}:meta  KEYS[2] {c:<id>}:barrier
--   ARGV[1] "open"  ARGV[2] lock owner  ARGV[3] run id  ARGV[4] epoch
--   Returns 1 (opened), 0 (lock not held, or another node: nothing written).
--
-- mode "raise" (a campaign of K > 1 buckets, on bucket i while the
-- barrier of another bucket holds the campaign's seal lock): when bucket
-- i is open on this node (meta.runid = this node's run id) its meta.epoch
-- is raised to the seal's epoch E (never lowered): every later order of
-- it carries E. Then: has group seckill-persist persisted the stream
-- through `through` (last-delivered-id >= it, nothing pending up to it)?
-- `through` "" (first call) or a bucket not open: the stream's last entry
-- now ("0-0" when empty).
--   KEYS[1] {T}:meta  KEYS[2] {T}:orders
--   ARGV[1] "raise"  ARGV[2] E  ARGV[3] group  ARGV[4] through
--   Returns {open 0/1, through, persisted through it 0/1}.
--
-- mode "unlock": deletes a lock (the campaign's seal lock) held by ARGV[2].
--   KEYS[1] the lock  ARGV[1] "unlock"  ARGV[2] owner.  Returns 1 or 0.
local function id_less(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end

local function persisted_through(stream, group, through)
  if through == '0-0' then return 1 end
  local groups = redis.pcall('XINFO', 'GROUPS', stream)
  if type(groups) ~= 'table' or groups.err then return 0 end
  for _, g in ipairs(groups) do
    local f = {}
    for k = 1, #g, 2 do f[g[k]] = g[k + 1] end
    if f['name'] == group then
      if id_less(f['last-delivered-id'], through) then return 0 end
      local p = redis.call('XPENDING', stream, group, '-', through, 1)
      if #p > 0 then return 0 end
      return 1
    end
  end
  return 0
end

if ARGV[1] == 'raise' then
  local e, group, through = tonumber(ARGV[2]), ARGV[3], ARGV[4]
  local node = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
  local open = redis.call('HGET', KEYS[1], 'runid') == node
  if open and tonumber(redis.call('HGET', KEYS[1], 'epoch') or '1') < e then
    redis.call('HSET', KEYS[1], 'epoch', e)
  end
  if not open or through == '' then
    local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
    through = last[1] and last[1][1] or '0-0'
  end
  return {open and 1 or 0, through, persisted_through(KEYS[2], group, through)}
end
if ARGV[1] == 'unlock' then
  if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
  redis.call('DEL', KEYS[1])
  return 1
end
if ARGV[1] == 'open' then
  if redis.call('GET', KEYS[2]) ~= ARGV[2] then
    return 0
  end
  if string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') ~= ARGV[3] then
    return 0
  end
  redis.call('HSET', KEYS[1], 'runid', ARGV[3], 'epoch', ARGV[4])
  redis.call('DEL', KEYS[2])
  return 1
end
if ARGV[1] ~= 'mirror' then
  return redis.error_reply('ERR bad mode')
end
local status_ttl, idem_ttl = tonumber(ARGV[3]), ARGV[4]
local n = (#ARGV - 4) / 7
local taken, given = 0, 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function answer_of(key)
  local v = redis.pcall('GET', key)
  return type(v) == 'string' and v or nil
end

local function take(i, oid, user, qty, path, idem, final)
  local k = 8 + 3 * (i - 1)
  local hash, idem_first, idem_user = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local held = redis.call('HEXISTS', KEYS[7], oid) == 1 or redis.call('EXISTS', hash) == 1
  if redis.call('SADD', KEYS[3], oid) == 0 then held = true end
  if held then return end
  local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
  if path == 'redis' then
    stock = redis.call('DECRBY', KEYS[1], qty)
    redis.call('SADD', KEYS[6], oid)
  end
  redis.call('HINCRBY', KEYS[2], user, qty)
  redis.call('HSET', KEYS[7], oid, user .. '\n' .. qty)
  local ends = tonumber(redis.call('HGET', KEYS[8], 'ends_at_ms') or '0') or 0
  local until_ms = math.max(ends, now) + status_ttl
  local ttl = redis.call('PTTL', KEYS[7])
  if ttl < 0 or now + ttl < until_ms then redis.call('PEXPIREAT', KEYS[7], string.format('%.0f', until_ms)) end
  if idem ~= '' then
    local first = answer_of(idem_first)
    local key = nil
    if not first then key = idem_first
    elseif string.match(first, '^[^\n]*') ~= user and not answer_of(idem_user) then key = idem_user end
    if key then
      if stock < 0 then stock = 0 end
      -- the database holds it: confirmed ("\nc", idem_confirm.lua) unless refused
      local mark = final == 'dropped' and '' or '\nc'
      redis.call('SET', key, user .. '\n' .. oid .. '\n' .. qty .. '\n' .. stock .. mark, 'PX', idem_ttl)
    end
  end
  taken = taken + 1
end

local function buyer_less(user, qty)
  if redis.call('HINCRBY', KEYS[2], user, -qty) <= 0 then
    redis.call('HDEL', KEYS[2], user)
  end
end

for i = 1, n do
  local a = 4 + 7 * (i - 1)
  local oid, user, qty, path = ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]), ARGV[a + 4]
  local final = ARGV[a + 7]
  take(i, oid, user, qty, path, ARGV[a + 5], final)
  if final == 'released' and redis.call('SADD', KEYS[4], oid) == 1 then
    redis.call('INCRBY', KEYS[1], qty)
    buyer_less(user, qty)
    local hash = KEYS[8 + 3 * (i - 1) + 1]
    if redis.call('EXISTS', hash) == 1 then redis.call('HSET', hash, 'status', 'cancelled') end
    local st = redis.call('HGET', KEYS[7], oid)
    if st then redis.call('HSET', KEYS[7], oid, string.match(st, '^[^\n]*\n[^\n]*') .. '\ncancelled') end
    given = given + 1
  elseif final == 'dropped' and redis.call('SADD', KEYS[5], oid) == 1 then
    buyer_less(user, qty)
    given = given + 1
  end
end
return {taken, given}
