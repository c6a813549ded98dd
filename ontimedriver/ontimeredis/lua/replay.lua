-- replay.lua: move dead letters back to scheduled, due now, attempt 0.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] dead zset, KEYS[4] dead hash
-- ARGV[1] wake channel, then ids
-- Returns how many were moved. A dead letter whose id is live stays dead.
local now = now_ms()
local n = 0
for i = 2, #ARGV do
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
if n > 0 then
  redis.call('PUBLISH', ARGV[1], fmt(now))
end
return n
