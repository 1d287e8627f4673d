-- fence_guard.lua: storage-side fencing check: accept a token only if it is
-- not lower than the highest one recorded, and record it.
-- KEYS[1] guard key (no expiry: it must never go back)
-- ARGV[1] token (decimal uint64, no leading zeros)
-- Returns {1, highest} accepted; {0, highest} stale.
-- Compared as digit strings (length, then bytes): exact for all uint64.
local cur = redis.call('get', KEYS[1])
local tok = ARGV[1]
local newer = (not cur) or #tok > #cur or (#tok == #cur and tok >= cur)
if newer then
  redis.call('set', KEYS[1], tok)
  return {1, tok}
end
return {0, cur}
