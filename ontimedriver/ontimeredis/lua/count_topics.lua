-- count_topics.lua: count.lua for many topics in one call (one Redis, where
-- a script may touch keys of any slot: CountTopics).
-- KEYS per topic 3: due zset, lease hash, dead zset
-- Returns per topic 3 values: all live timers, live leases, dead letters.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #KEYS, 3 do
  local leased = 0
  for _, sc in ipairs(many('ZMSCORE', KEYS[i], redis.call('HKEYS', KEYS[i + 1]))) do
    if sc and tonumber(sc) > now then
      leased = leased + 1
    end
  end
  out[i] = redis.call('ZCARD', KEYS[i])
  out[i + 1] = leased
  out[i + 2] = redis.call('ZCARD', KEYS[i + 2])
end
return out
