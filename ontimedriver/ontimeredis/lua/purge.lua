-- purge.lua: delete dead letters.
-- KEYS[1] dead zset, KEYS[2] dead hash
-- ARGV[1] "all": every dead letter of the topic (no more ARGV);
--         "ids": exactly the ids in ARGV[2..] (none: nothing).
-- Returns how many were deleted.
if ARGV[1] == 'all' then
  local n = redis.call('ZCARD', KEYS[1])
  redis.call('UNLINK', KEYS[1], KEYS[2])
  return n
end
if ARGV[1] ~= 'ids' then
  return redis.error_reply('purge.lua: ARGV[1] must be all or ids')
end
local n = 0
for i = 2, #ARGV do
  n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('HDEL', KEYS[2], ARGV[i])
end
return n
