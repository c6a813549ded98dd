-- compat_replay.lua: move dead letters back to the timeline, due now.
-- KEYS[1] timeline zset, KEYS[2] payloads hash, KEYS[3] dead zset, KEYS[4] dead hash
-- ARGV[1] wake channel, then ids
-- Returns how many were moved. A dead letter whose id is live stays dead.
local now = math.floor(now_us() / 1000) * 1000
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
    redis.call('ZADD', KEYS[1], secs(now), id)
    redis.call('HSET', KEYS[2], id, payload)
    redis.call('HDEL', KEYS[4], id)
    redis.call('ZREM', KEYS[3], id)
    n = n + 1
  end
end
if n > 0 then
  redis.call('PUBLISH', ARGV[1], fmt(now / 1000))
end
return n
