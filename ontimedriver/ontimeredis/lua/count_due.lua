-- count_due.lua: count a topic's timers between bounds, by score (the
-- instant each becomes claimable), for CountDue. One ZCOUNT per bound: no
-- member or payload is read. Both layouts.
-- KEYS[1] due zset (compatible layout: the timeline)
-- ARGV bounds, strictly increasing, as scores (native: ms; compatible:
-- seconds with six decimals)
-- Returns #ARGV + 1 counts: the timers before ARGV[1], then each
-- [ARGV[i-1], ARGV[i]), then those at or after the last bound.
local out = {}
local lo = '-inf'
for i = 1, #ARGV do
  out[i] = redis.call('ZCOUNT', KEYS[1], lo, '(' .. ARGV[i])
  lo = ARGV[i]
end
out[#ARGV + 1] = redis.call('ZCOUNT', KEYS[1], lo, '+inf')
return out
