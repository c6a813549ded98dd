-- count_topics.lua: count.lua for many topics in one call (one Redis, where
-- a script may touch keys of any slot: CountTopics).
-- KEYS per topic 3: due zset, lease hash, dead zset
-- Returns per topic 3 values: all live timers, live leases, dead letters.
local now = clock()
local out = {}
for i = 1, #KEYS, 3 do
  out[i], out[i + 1], out[i + 2] = count_topic(now, KEYS[i], KEYS[i + 1], KEYS[i + 2])
end
return out
