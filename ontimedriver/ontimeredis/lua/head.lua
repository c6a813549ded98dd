-- head.lua: a topic's head and the clock, for SyncTopicIndex on a Redis
-- Cluster (the clock versions the hint written from it, see hint.lua).
-- KEYS[1] due zset
-- Returns {clock us, head ms or ""}.
local t = redis.call('TIME')
local h = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local s = ''
if h[2] then
  s = string.format('%.0f', tonumber(h[2]))
end
return {tonumber(t[1]) * 1000000 + tonumber(t[2]), s}
