-- extend.lua: push lease deadlines, fenced by token; tokens stay valid.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash
-- ARGV[1] lease ms, then pairs: id, token
-- Returns one integer per lease: 1 extended, 0 lost.
local deadline = now_ms() + tonumber(ARGV[1])
local q = {}
for i = 2, #ARGV, 2 do
  q[#q + 1] = ARGV[i]
end
local leases = many('HMGET', KEYS[3], q)
local out = {}
local n = 0
for i = 2, #ARGV, 2 do
  n = n + 1
  if held(leases[n], ARGV[i + 1]) then
    redis.call('ZADD', KEYS[1], 'XX', deadline, ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
