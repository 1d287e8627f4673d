-- barrier_mirror.lua: the barrier's writes on a new master
-- (docs/design/promise.md, "A barrier after every change of master"), on
-- one bucket's keys ({T} below: {c:<id>} for a K = 1 campaign, else the
-- bucket's tag; the caller gives bucket j only the orders of users whose
-- home bucket is j).
-- Idempotent: running it again, or after a crash, changes nothing more.
--
-- mode "mirror": gives the master the orders the database holds and the
-- master lacks. An order is held when its hash {c:<id>}:order:<oid>
-- exists or its id is in {c:<id>}:mirrored (the hash expires; the set
-- does not: every order seen here joins it). A missing order is taken:
-- stock -= qty for a Redis-path order (a database-path order sold a
-- reserve unit), buyers[user] += qty, the order hash, and the
-- Idempotency-Key answer "user\norder_id\nqty\nremaining" (as
-- purchase.lua writes it; remaining = the stock now), marked confirmed
-- ("\nc", as idem_confirm.lua marks it) unless refused, unless the key
-- holds one for that user (the key's hash: one answer per user,
-- purchase.lua; a key still kept as one string is left alone). Then the give-backs the master lost are applied again, each behind
-- its gate: a cancelled order (final "released", gate {c:<id>}:released):
-- stock += qty, buyers -= qty, hash status cancelled; a tentative order
-- refused at finalisation (final "dropped", gate {c:<id>}:dropped):
-- buyers -= qty. A Redis-path order taken here joins {c:<id>}:carried: it is
-- in the database but not in this master's stream, which reconcile counts.
--   KEYS[1] {c:<id>}:stock  KEYS[2] {c:<id>}:buyers  KEYS[3] {c:<id>}:mirrored
--   KEYS[4] {c:<id>}:released  KEYS[5] {c:<id>}:dropped  KEYS[6] {c:<id>}:carried
--   then 2 per order i (k = 6 + 2*(i-1)): KEYS[k+1] order hash, KEYS[k+2]
--   idempotency key ({c:<id>}:idem:<key>; any key of the slot when none)
--   ARGV[1] "mirror"  ARGV[2] campaign id  ARGV[3] order hash ttl ms
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
local cid, hash_ttl, idem_ttl = ARGV[2], ARGV[3], ARGV[4]
local n = (#ARGV - 4) / 7
local taken, given = 0, 0

local function take(i, oid, user, qty, path, idem, ts, final)
  local hash, idem_key = KEYS[6 + 2 * i - 1], KEYS[6 + 2 * i]
  local held = redis.call('EXISTS', hash) == 1
  if redis.call('SADD', KEYS[3], oid) == 0 then held = true end
  if held then return end
  local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
  if path == 'redis' then
    stock = redis.call('DECRBY', KEYS[1], qty)
    redis.call('SADD', KEYS[6], oid)
  end
  redis.call('HINCRBY', KEYS[2], user, qty)
  redis.call('HSET', hash, 'campaign', cid, 'user', user, 'qty', qty, 'status', 'accepted', 'ts_ms', ts)
  redis.call('PEXPIRE', hash, hash_ttl)
  if idem ~= '' and redis.call('TYPE', idem_key).ok ~= 'string' and redis.call('HEXISTS', idem_key, user) == 0 then
    if stock < 0 then stock = 0 end
    -- the database holds it: confirmed ("\nc", idem_confirm.lua) unless refused
    local mark = final == 'dropped' and '' or '\nc'
    redis.call('HSET', idem_key, user, user .. '\n' .. oid .. '\n' .. qty .. '\n' .. stock .. mark)
    redis.call('PEXPIRE', idem_key, idem_ttl)
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
  take(i, oid, user, qty, path, ARGV[a + 5], ARGV[a + 6], final)
  if final == 'released' and redis.call('SADD', KEYS[4], oid) == 1 then
    redis.call('INCRBY', KEYS[1], qty)
    buyer_less(user, qty)
    local hash = KEYS[5 + 2 * i - 1]
    if redis.call('EXISTS', hash) == 1 then redis.call('HSET', hash, 'status', 'cancelled') end
    given = given + 1
  elseif final == 'dropped' and redis.call('SADD', KEYS[5], oid) == 1 then
    buyer_less(user, qty)
    given = given + 1
  end
end
return {taken, given}
