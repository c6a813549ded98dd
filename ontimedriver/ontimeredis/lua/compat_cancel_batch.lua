-- compat_cancel_batch.lua: delete timers, as Python's cancel does for one,
-- all in one script. It touches only the two keys Python writes.
-- KEYS[1] timeline zset, KEYS[2] payloads hash
-- ARGV the ids
-- Returns a string with one byte per id: '1' when its timer was deleted,
-- '0' when there was none (an id given twice is '0' the second time).
local out = {}
for i = 1, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  if redis.call('HDEL', KEYS[2], ARGV[i]) == 1 then
    out[i] = '1'
  else
    out[i] = '0'
  end
end
return table.concat(out)
