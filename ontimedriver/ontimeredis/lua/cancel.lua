-- cancel.lua: delete a scheduled or leased timer.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash
-- ARGV[1] id
-- Returns 1 when a timer was deleted, 0 when there was none.
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return redis.call('HDEL', KEYS[2], ARGV[1])
