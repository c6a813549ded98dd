-- recur.lua: write one recurring timer (its first tick) and its schedule
-- entry.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] schedule
-- hash, KEYS[5] the topic's shard count key (set when the topic is
-- sharded: writing here is refused, as in schedule.lua), KEYS[6] the topic
-- index and KEYS[7] the topic registry (one Redis only; absent on a Redis
-- Cluster)
-- ARGV[1] mode: "0" upsert, "1" if absent, ARGV[2] wake channel, ARGV[3]
-- topic, ARGV[4] id, ARGV[5] due ms, ARGV[6] tick number, ARGV[7] spec,
-- ARGV[8] envelope, ARGV[9] the tick's scheduled instant ms
-- Returns {due ms, or -1 when the id exists (if absent); the clock (us);
-- the index hint ("" when nothing was written)}.
-- An upsert drops any lease of the id (its token stops working) and
-- un-pauses; the last tick and outcome of a recurring timer are kept.
local shards = redis.call('GET', KEYS[5])
if shards then
  return redis.error_reply('ONTIMESHARDS ' .. shards)
end
local now, sub = clock()
local id = ARGV[4]
if ARGV[1] == '1' and redis.call('HEXISTS', KEYS[2], id) == 1 then
  return {-1, now * 1000 + sub, ''}
end
local old = head(KEYS[1])
local due = tonumber(ARGV[5])
local last = '0,'
local prev = redis.call('HGET', KEYS[4], id)
if prev then
  local lt, lo = string.match(prev, '^%d+,%-?%d+,%d,(%d+),(%a*),')
  if lt then
    last = lt .. ',' .. lo
  end
end
redis.call('HSET', KEYS[2], id, record(0, due, '', ARGV[8]))
redis.call('ZADD', KEYS[1], ARGV[5], id)
redis.call('HDEL', KEYS[3], id)
redis.call('HSET', KEYS[4], id, ARGV[6] .. ',' .. ARGV[9] .. ',0,' .. last .. ',' .. ARGV[7])
if KEYS[7] then
  redis.call('SADD', KEYS[7], ARGV[3])
end
local low = due
if old and old < low then
  low = old
end
idx_lower(KEYS[6], ARGV[3], low)
if not old or due < old then
  redis.call('PUBLISH', ARGV[2], fmt(due))
end
return {due, now * 1000 + sub, fmt(low)}
