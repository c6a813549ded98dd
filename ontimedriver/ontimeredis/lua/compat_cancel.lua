-- compat_cancel.lua: delete a timer, as Python's cancel does.
-- KEYS[1] timeline zset, KEYS[2] payloads hash
-- ARGV[1] id
-- Returns 1 when a timer was deleted, 0 when there was none.
redis.call('ZREM', KEYS[1], ARGV[1])
return redis.call('HDEL', KEYS[2], ARGV[1])
