-- fire.lua: make a scheduled timer due now, keeping its record (FireNow).
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] the topic
-- index (one Redis only; absent on a Redis Cluster)
-- ARGV[1] id, ARGV[2] wake channel, ARGV[3] topic
-- Returns {0, due ms} when the timer is due now (made due, or due already:
-- then it keeps its due time and place), {1} when there is no such timer,
-- {2} when a worker holds it under a live lease (nothing changes). A timer
-- made due lowers the topic's index entry to now (KEYS[4]), and the reply
-- then carries the clock (us) and that instant, {0, due ms, us, ms}, for
-- the driver to do so on a Cluster.
local now, sub = clock()
local id = ARGV[1]
local score = redis.call('ZSCORE', KEYS[1], id)
local rec = redis.call('HGET', KEYS[2], id)
if not score or not rec then
  return {1}
end
score = tonumber(score)
if score > now and redis.call('HEXISTS', KEYS[3], id) == 1 then
  return {2}
end
local r = parse(rec)
if score <= now then
  if r then
    return {0, fmt(r.due)}
  end
  return {0, fmt(score)}
end
local old = head(KEYS[1])
local low = now
if old and old < low then
  low = old
end
idx_lower(KEYS[4], ARGV[3], low)
redis.call('ZADD', KEYS[1], fmt(now), id)
if r then
  redis.call('HSET', KEYS[2], id, record(r.attempt, now, r.err, r.payload))
end
if not old or now < old then
  redis.call('PUBLISH', ARGV[2], fmt(now))
end
return {0, fmt(now), now * 1000 + sub, fmt(low)}
