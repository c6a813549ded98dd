-- peek.lua: the scores of a shard's first entries, for a claim across the
-- shards of a sharded topic (see shard.go). Read-only.
-- KEYS[1] due zset
-- ARGV[1] max
-- Returns {now us, then the scores of the first max entries of the zset, in
-- order}: those at or before now are claimable, as claim.lua reads them.
local now, sub = clock()
local r = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local out = {now * 1000 + sub}
for i = 2, #r, 2 do
  out[#out + 1] = r[i]
end
return out
