-- compat_fire.lua: make a timer due now (FireNow), in the Python layout.
-- A lease written by a Go worker cannot be told from a Python due time
-- (see compat_common.lua), so a timer being delivered is made due too.
-- KEYS[1] timeline zset, KEYS[2] payloads hash
-- ARGV[1] id, ARGV[2] wake channel
-- Returns {0, due us} when the timer is due now (made due, or due
-- already: then it keeps its score), {1} when there is no such timer.
local now = now_us()
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return {1}
end
local s = score_us(score)
if s <= now then
  return {0, fmt(s)}
end
local old = head(KEYS[1])
local due = floor_ms(now)
redis.call('ZADD', KEYS[1], secs(due), ARGV[1])
if not old or due / 1000000 < old then
  redis.call('PUBLISH', ARGV[2], fmt(due / 1000))
end
return {0, fmt(due)}
