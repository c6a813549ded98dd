-- compat_claim.lua: lease up to max due timers, oldest first.
-- KEYS[1] timeline zset, KEYS[2] payloads hash
-- ARGV[1] max, ARGV[2] lease us (whole milliseconds)
-- Returns {now ms in us, next claimable score or "", then per claimed
-- timer: id, token, score it had, lease deadline us, envelope}.
local now = now_us()
-- Due at millisecond resolution, as in the native layout: a score is due
-- once the store's clock reaches its millisecond.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. secs(floor_ms(now) + 1000), 'LIMIT', 0, tonumber(ARGV[1]))
local out = {floor_ms(now), ''}
if #ids > 0 then
  local envs = redis.call('HMGET', KEYS[2], unpack(ids))
  local scores = redis.call('ZMSCORE', KEYS[1], unpack(ids))
  local gone, zadd = {}, {}
  for i, id in ipairs(ids) do
    local env = envs[i]
    if not env then
      -- an orphan: an id without a body is removed, as Python does.
      gone[#gone + 1] = id
    else
      local old = scores[i]
      local old_us = to_us(old)
      local tag = next_tag(old_us, now)
      local deadline = lease_us(now, tonumber(ARGV[2]), tag)
      zadd[#zadd + 1] = secs(deadline)
      zadd[#zadd + 1] = id
      out[#out + 1] = id
      out[#out + 1] = tag .. ':' .. fmt(math.floor(old_us / 1000))
      out[#out + 1] = old
      out[#out + 1] = deadline
      out[#out + 1] = env
    end
  end
  if #gone > 0 then
    redis.call('ZREM', KEYS[1], unpack(gone))
  end
  if #zadd > 0 then
    redis.call('ZADD', KEYS[1], unpack(zadd))
  end
end
local h = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if h[2] then
  out[2] = h[2]
end
return out
