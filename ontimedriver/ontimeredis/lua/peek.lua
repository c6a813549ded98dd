-- peek.lua: the due scores of a shard, for a claim across the shards of a
-- sharded topic (see shard.go). Read-only.
-- KEYS[1] due zset
-- ARGV[1] max
-- Returns {now us, then the scores of the first max entries due at or
-- before now (ms, as claim.lua reads them), in order; when none is due,
-- the score of the first entry, if any (the shard's next instant)}. An
-- idle shard costs O(log n), however many future timers it holds.
local now, sub = clock()
local r = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(now), 'WITHSCORES', 'LIMIT', '0', ARGV[1])
local out = {now * 1000 + sub}
for i = 2, #r, 2 do
  out[#out + 1] = r[i]
end
if #r == 0 then
  local h = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if h[2] then
    out[2] = h[2]
  end
end
return out
