-- replay.lua: move dead letters back to scheduled, due now, attempt 0.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] dead zset, KEYS[4] dead hash,
-- KEYS[5] the topic index (one Redis only; absent on a Redis Cluster)
-- ARGV[1] wake channel, ARGV[2] topic, then ids
-- Returns {how many were moved, clock us, index hint ms or ""}: when some
-- were, the topic's index entry is lowered to now or the old head,
-- whichever is earlier (KEYS[5]; on a Cluster the driver does). A dead
-- letter whose id is live stays dead.
local now, sub = clock()
local old = head(KEYS[1])
local n = 0
for i = 3, #ARGV do
  local id = ARGV[i]
  local drec = redis.call('HGET', KEYS[4], id)
  if drec and redis.call('HEXISTS', KEYS[2], id) == 0 then
    local d = parse_dead(drec)
    local payload = drec
    if d then
      payload = d.payload
    end
    redis.call('HSET', KEYS[2], id, record(0, now, '', payload))
    redis.call('ZADD', KEYS[1], now, id)
    redis.call('HDEL', KEYS[4], id)
    redis.call('ZREM', KEYS[3], id)
    n = n + 1
  end
end
local low = ''
if n > 0 then
  redis.call('PUBLISH', ARGV[1], fmt(now))
  low = now
  if old and old < low then
    low = old
  end
  idx_lower(KEYS[5], ARGV[2], low)
  low = fmt(low)
end
return {n, now * 1000 + sub, low}
