-- fenced_store.lua: the "storage" of `dlock torture` (tools/dlock/torture*.c):
-- a counter that, when fenced, remembers the highest fencing token it has
-- seen, on reads and on writes, and refuses any operation carrying a lower
-- one. Unfenced (ARGV[4] = "0") it accepts everything, as a storage that
-- ignores tokens would, and only records the tokens for the checker.
-- KEYS[1] counter, KEYS[2] highest token seen, KEYS[3] list of the tokens
-- of accepted writes (in acceptance order, for the checker)
-- ARGV[1] "read" | "write", ARGV[2] token (decimal, no leading zeros),
-- ARGV[3] value (write), ARGV[4] "1" fenced | "0" not fenced
-- Returns {1, value} for an accepted read, {1, 0} for an accepted write,
-- {0, highest} when refused.
local function less(a, b) -- decimal strings without leading zeros
  if #a ~= #b then return #a < #b end
  return a < b
end
local token = ARGV[2]
if ARGV[4] == '1' then
  local highest = redis.call('GET', KEYS[2]) or '0'
  if less(token, highest) then return {0, highest} end
  redis.call('SET', KEYS[2], token)
end
if ARGV[1] == 'read' then
  return {1, tonumber(redis.call('GET', KEYS[1]) or '0')}
end
redis.call('SET', KEYS[1], ARGV[3])
redis.call('RPUSH', KEYS[3], token)
return {1, 0}
