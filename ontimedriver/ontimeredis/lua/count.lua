-- count.lua: count a topic's timers by state.
-- KEYS[1] due zset, KEYS[2] lease hash, KEYS[3] dead zset
-- Returns {all live timers, live leases, dead letters}. A lease is live
-- while its due score (the lease deadline) is in the future.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local leased = 0
for _, sc in ipairs(many('ZMSCORE', KEYS[1], redis.call('HKEYS', KEYS[2]))) do
  if sc and tonumber(sc) > now then
    leased = leased + 1
  end
end
return {
  redis.call('ZCARD', KEYS[1]),
  leased,
  redis.call('ZCARD', KEYS[3]),
}
