-- shards.lua: record (or check) a topic's shard count before a driver
-- uses its shards.
-- KEYS[1] the topic's shard count key, KEYS[2] its (unsharded) due zset,
-- KEYS[3] its (unsharded) dead-letter zset
-- ARGV[1] the shard count the driver is configured with
-- Returns {"ok"}, {"other", <count stored>} when the topic was sharded
-- with another count, or {"unsharded"} when the topic holds timers or dead
-- letters in its unsharded keys.
local cur = redis.call('GET', KEYS[1])
if cur then
  if cur == ARGV[1] then
    return {'ok'}
  end
  return {'other', cur}
end
if redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then
  return {'unsharded'}
end
redis.call('SET', KEYS[1], ARGV[1])
return {'ok'}
