-- compat_extend.lua: push lease deadlines, fenced by tag; tags stay valid.
-- KEYS[1] timeline zset, KEYS[2] payloads hash
-- ARGV[1] lease us, then pairs: id, token
-- Returns one integer per lease: 1 extended, 0 lost.
local now = now_us()
local out = {}
for i = 2, #ARGV, 2 do
  local ok, tag = fenced(KEYS[1], KEYS[2], ARGV[i], ARGV[i + 1])
  if ok then
    redis.call('ZADD', KEYS[1], 'XX', secs(lease_us(now, tonumber(ARGV[1]), tag)), ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
