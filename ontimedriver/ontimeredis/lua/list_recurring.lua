-- list_recurring.lua: what Get reads, for a page of a topic's recurring
-- timers (ListRecurring picks the ids from the schedule hash's HKEYS).
-- KEYS[1] schedule hash, KEYS[2] due zset, KEYS[3] msg hash, KEYS[4]
-- lease hash
-- ARGV ids
-- Returns {now ms, then per id: score or "", lease entry or "", record or
-- "", schedule entry or ""}.
local out = {now_ms()}
for i = 1, #ARGV do
  local id = ARGV[i]
  out[#out + 1] = redis.call('ZSCORE', KEYS[2], id) or ''
  out[#out + 1] = redis.call('HGET', KEYS[4], id) or ''
  out[#out + 1] = redis.call('HGET', KEYS[3], id) or ''
  out[#out + 1] = redis.call('HGET', KEYS[1], id) or ''
end
return out
