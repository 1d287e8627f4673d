-- idem_confirm.lua: marks the Idempotency-Key answers of orders the
-- database now holds (persisted, paid or cancelled), so a replay of the
-- key answers 201 whatever the master's replicas (purchase.lua, code
-- "confirmed"). The persister calls it after the batch's COMMIT and before
-- its XACK: a mark lost with a master is written again when the entry is
-- delivered again. Every key is of one bucket (one stream): one slot.
--   KEYS[i]  {T}:idem:<key> of order i (a hash, one answer per user; a
--            string: one answer kept before answers were per user)
--   ARGV[i]  order i's id (decimal)
-- An answer is marked only when it is that order's ("user\norder_id\nqty\n
-- remaining", purchase.lua) and not marked yet: "\nc" is appended, its
-- TTL kept. A key that expired or answers another order is left alone.
-- Returns the number of answers marked now.
local marked = 0
local function mine(v, oid)
  local o, mark = string.match(v, '^[^\n]*\n(%d+)\n%d+\n%d+\n?(c?)$')
  return o == oid and mark == ''
end
for i = 1, #KEYS do
  local kind = redis.call('TYPE', KEYS[i]).ok
  if kind == 'hash' then
    local all = redis.call('HGETALL', KEYS[i])
    for f = 1, #all, 2 do
      if mine(all[f + 1], ARGV[i]) then
        redis.call('HSET', KEYS[i], all[f], all[f + 1] .. '\nc') -- the key's TTL stays
        marked = marked + 1
      end
    end
  elseif kind == 'string' then
    local v = redis.call('GET', KEYS[i])
    if mine(v, ARGV[i]) then
      redis.call('SET', KEYS[i], v .. '\nc', 'KEEPTTL')
      marked = marked + 1
    end
  end
end
return marked
