-- purge.lua: delete dead letters.
-- KEYS[1] dead zset, KEYS[2] dead hash
-- ARGV: ids; none means all of the topic's dead letters.
-- Returns how many were deleted.
if #ARGV == 0 then
  local n = redis.call('ZCARD', KEYS[1])
  redis.call('UNLINK', KEYS[1], KEYS[2])
  return n
end
local n = 0
for i = 1, #ARGV do
  n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('HDEL', KEYS[2], ARGV[i])
end
return n
