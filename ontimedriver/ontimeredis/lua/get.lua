-- get.lua: read one timer.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] schedule
-- hash
-- ARGV[1] id
-- Returns {now ms, score or "", lease entry or "", record or "", schedule
-- entry or ""}.
local id = ARGV[1]
return {
  now_ms(),
  redis.call('ZSCORE', KEYS[1], id) or '',
  redis.call('HGET', KEYS[3], id) or '',
  redis.call('HGET', KEYS[2], id) or '',
  redis.call('HGET', KEYS[4], id) or '',
}
