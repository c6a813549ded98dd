-- compat_get.lua: read one timer.
-- KEYS[1] timeline zset, KEYS[2] payloads hash
-- ARGV[1] id
-- Returns {now us, score or "", 1 if the envelope exists else 0, envelope or ""}.
local env = redis.call('HGET', KEYS[2], ARGV[1])
local found = 0
if env then
  found = 1
end
return {
  now_us(),
  redis.call('ZSCORE', KEYS[1], ARGV[1]) or '',
  found,
  env or '',
}
