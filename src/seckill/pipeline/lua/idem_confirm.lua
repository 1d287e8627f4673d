-- idem_confirm.lua: marks the Idempotency-Key answers of orders the
-- database now holds (persisted, paid or cancelled), so a replay of the
-- key answers 201 whatever the master's replicas (purchase.lua, code
-- "confirmed"). The persister calls it after the batch's COMMIT and before
-- its XACK: a mark lost with a master is written again when the entry is
-- delivered again. Every key is of one bucket (one stream): one slot.
--   KEYS[2i-1] {T}:idem:<key> of order i (the answer of the key's first
--              user, as every version wrote it)
--   KEYS[2i]   {T}:iu:<user>/<key> (the answer of another user of the key)
--   ARGV[i]    order i's id (decimal)
-- An answer is marked only when it is that order's ("user\norder_id\nqty\n
-- remaining", purchase.lua) and not marked yet: "\nc" is appended, its
-- TTL kept. A key that expired, answers another order or is no string is
-- left alone.
-- Returns the number of answers marked now.
local marked = 0
local function mine(v, oid)
  local o, mark = string.match(v, '^[^\n]*\n(%d+)\n%d+\n%d+\n?(c?)$')
  return o == oid and mark == ''
end
for i = 1, #ARGV do
  for j = 2 * i - 1, 2 * i do
    local v = redis.pcall('GET', KEYS[j])
    if type(v) == 'string' and mine(v, ARGV[i]) then
      redis.call('SET', KEYS[j], v .. '\nc', 'KEEPTTL')
      marked = marked + 1
    end
  end
end
return marked
