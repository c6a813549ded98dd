-- cancel_batch.lua: delete scheduled or leased timers, as cancel.lua does
-- for one, all in one script.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] schedule
-- hash, KEYS[5] the topic index (one Redis only; absent on a Redis Cluster)
-- ARGV[1] topic, then the ids
-- Returns {a string with one byte per id, '1' when its timer was deleted,
-- '0' when there was none (an id given twice is '0' the second time); the
-- clock (us); 1 when the topic holds no timer now and the call deleted
-- some}. An emptied topic leaves the index (KEYS[5]; on a Cluster the
-- driver removes it); otherwise its entry may stay below its new head,
-- which the next claim corrects.
local out = {}
local sched = redis.call('EXISTS', KEYS[4]) == 1
local deleted = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[3], id)
  if sched then
    redis.call('HDEL', KEYS[4], id)
  end
  if redis.call('HDEL', KEYS[2], id) == 1 then
    out[i - 1] = '1'
    deleted = deleted + 1
  else
    out[i - 1] = '0'
  end
end
local empty = 0
if deleted > 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  empty = 1
  if KEYS[5] then
    redis.call('ZREM', KEYS[5], ARGV[1])
  end
end
local t = redis.call('TIME')
return {table.concat(out), tonumber(t[1]) * 1000000 + tonumber(t[2]), empty}
