-- campaign_heat.lua: pre-heats a campaign into Redis (meta, stock).
-- mode "create": refused if the campaign exists. mode "reheat": rewrites
-- meta and sets stock = max(0, stock - db_reserve (or ARGV[14]) - units held by buyers);
-- refused while the campaign is live (server clock inside [starts, ends))
-- unless mode is "force". Never resets what buyers hold, so a re-heat
-- cannot oversell. db_reserve units are carved out for the database path
-- (docs/design/promise.md): Redis never sells them.
-- Barrier fields: "create" sets meta.runid = ARGV[8] (the run id of the
-- server the engine is connected to) and epoch = 1. "reheat" keeps both
-- (the barrier runner owns them) and only fills them when absent (a
-- campaign from before the barrier, or a meta Redis lost); "force" also
-- sets runid: the operator vouches that this server holds every order
-- (the way to reopen a campaign where no barrier runner works, e.g. no
-- database). epoch is never lowered.
-- KEYS[1] {c:<id>}:meta  KEYS[2] {c:<id>}:stock  KEYS[3] {c:<id>}:buyers
-- ARGV[1] mode  ARGV[2] title  ARGV[3] stock  ARGV[4] per_user_limit
-- ARGV[5] starts_at_ms  ARGV[6] ends_at_ms  ARGV[7] price_cents
-- ARGV[8] run id of the connected server ("": this node's own, from INFO
--   server: on a Cluster the engine does not know which node serves the slot)
-- ARGV[9] db_reserve (0..stock)
-- ARGV[10..13], a sharded campaign's bucket (all "" for a campaign of one
--   bucket, whose meta stays as it always was): K, this bucket's index j,
--   the bucket tags (bucket 0 only, else ""), and this bucket's units (its
--   share of stock - db_reserve, before what its buyers hold). The keys
--   are then bucket j's ({<tag>}:meta ...); each bucket keeps the whole
--   definition, and its own runid and epoch (the barrier is per bucket).
--   An existing bucket keeps its stock on "reheat"/"force" (units move
--   between buckets, so a bucket's share says nothing about what it
--   holds now); a missing one is created with its share. Mode "bucket"
--   (the buckets after bucket 0 at creation, which bucket 0's "create"
--   has just proven new) writes everything, stock included.
-- ARGV[14] units the database path keeps apart from what buyers hold
--   ("" = db_reserve): on a re-heat after database-path sales, the reserve
--   left + its orders not yet mirrored + a handback not yet applied. The
--   mirrored ones are among the buyers, so each sale counts once and
--   initial = remaining + bought + database reserve holds (reconcile).
--   db_reserve stays the definition's (meta).
-- Returns {0, remaining} | {-1, 0} exists | {-2, 0} live (not forced)
local mode = ARGV[1]
local sharded = ARGV[10] ~= ''
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and mode == 'create' then return {-1, 0} end
if exists and mode == 'reheat' then
  local w = redis.call('HMGET', KEYS[1], 'starts_at_ms', 'ends_at_ms')
  if now >= tonumber(w[1]) and now < tonumber(w[2]) then return {-2, 0} end
end
local reserve = tonumber(ARGV[9]) or 0
local apart = reserve
if ARGV[14] and ARGV[14] ~= '' then apart = tonumber(ARGV[14]) end
local remaining = tonumber(ARGV[3]) - apart
if sharded then remaining = tonumber(ARGV[13]) end
local keep = sharded and exists and mode ~= 'bucket'
local held = redis.call('HVALS', KEYS[3])
for _, v in ipairs(held) do remaining = remaining - tonumber(v) end
if remaining < 0 then remaining = 0 end
local old = redis.call('HMGET', KEYS[1], 'runid', 'epoch')
local runid = old[1]
if mode ~= 'reheat' or not runid then runid = ARGV[8] end
if runid == '' then runid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') end
redis.call('HSET', KEYS[1], 'title', ARGV[2], 'stock', ARGV[3], 'per_user_limit', ARGV[4],
           'starts_at_ms', ARGV[5], 'ends_at_ms', ARGV[6], 'price_cents', ARGV[7],
           'created_at_ms', tostring(now), 'db_reserve', tostring(reserve), 'runid', runid,
           'epoch', old[2] or '1')
if sharded then
  redis.call('HSET', KEYS[1], 'shards', ARGV[10], 'bucket', ARGV[11])
  if ARGV[12] ~= '' then redis.call('HSET', KEYS[1], 'bucket_tags', ARGV[12]) end
end
if keep then return {0, tonumber(redis.call('GET', KEYS[2]) or '0')} end
redis.call('SET', KEYS[2], remaining)
return {0, remaining}
