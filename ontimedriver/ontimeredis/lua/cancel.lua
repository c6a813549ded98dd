-- cancel.lua: delete a scheduled or leased timer.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] schedule
-- hash, KEYS[5] the topic index (one Redis only; absent on a Redis Cluster)
-- ARGV[1] id, ARGV[2] topic
-- Returns {1 when a timer was deleted, 0 when there was none; the clock
-- (us); 1 when the topic holds no timer now}. An emptied topic leaves the
-- index (KEYS[5]; on a Cluster the driver removes it); otherwise its entry
-- may stay below its new head, which the next claim corrects.
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
local n = redis.call('HDEL', KEYS[2], ARGV[1])
local empty = 0
if n == 1 and redis.call('EXISTS', KEYS[1]) == 0 then
  empty = 1
  if KEYS[5] then
    redis.call('ZREM', KEYS[5], ARGV[2])
  end
end
local t = redis.call('TIME')
return {n, tonumber(t[1]) * 1000000 + tonumber(t[2]), empty}
