-- prune.lua: remove topics that hold nothing from the topic registry,
-- atomically with the check (one Redis: schedule.lua adds a topic in the
-- same step as its first timer, so a topic is never removed while a
-- timer is being written to it).
-- KEYS[1] the registry set, then per topic its due zset and dead zset
-- ARGV the topics, in the order of their keys
-- Returns how many were removed.
local n = 0
for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[2 * i], KEYS[2 * i + 1]) == 0 then
    n = n + redis.call('SREM', KEYS[1], ARGV[i])
  end
end
return n
