-- lock_status.lua: read-only description of a lock (for `dlock status`).
-- KEYS[1] lock key, KEYS[2] fence key, KEYS[3] (optional) label key
-- Returns {type, holder, count, pttl, last fence, label, holder's fence}:
-- type "none", "string",
-- "hash" or another Redis type; holder the string value or the first hash
-- field ("" otherwise); count 1 for a string, the hash field's count;
-- label the holder's entry in the label key ("" none: a label written by
-- another holder is never reported); holder's fence the label key's ""
-- field when the label is the holder's ("" otherwise).
local ty = redis.call('type', KEYS[1]).ok
local holder, count = '', 0
if ty == 'string' then
  holder = redis.call('get', KEYS[1])
  count = 1
elseif ty == 'hash' then
  local h = redis.call('hgetall', KEYS[1])
  if #h >= 2 then
    holder = h[1]
    count = tonumber(h[2]) or 0
  end
end
local fence = redis.call('get', KEYS[2]) or '0'
local label, hfence = '', ''
if KEYS[3] and holder ~= '' and redis.call('type', KEYS[3]).ok == 'hash' then
  label = redis.call('hget', KEYS[3], holder) or ''
  if label ~= '' then hfence = redis.call('hget', KEYS[3], '') or '' end
end
return {ty, holder, count, redis.call('pttl', KEYS[1]), fence, label, hfence}
