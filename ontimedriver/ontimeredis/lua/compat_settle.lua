-- compat_settle.lua: apply outcomes, each fenced by its lease tag.
-- KEYS[1] timeline zset, KEYS[2] payloads hash, and when dead letters are
-- enabled KEYS[3] dead zset, KEYS[4] dead hash
-- ARGV[1] wake channel
-- then per outcome 6 values: id, token, kind (0 ack, 1 retry, 2 snooze,
-- 3 dead), delay ms, reason, error text
-- Returns one integer per outcome: 1 applied, 0 lease lost.
local now = now_us()
local old = head(KEYS[1])
local out = {}
local earliest = nil
local q = {}
for i = 2, #ARGV, 6 do
  q[#q + 1] = ARGV[i]
end
local scores = many('ZMSCORE', KEYS[1], q)
local done = {}
local del, zadd = {}, {}
local n = 0
for i = 2, #ARGV, 6 do
  n = n + 1
  local id, kind = ARGV[i], ARGV[i + 2]
  local tag, due = parse_token(ARGV[i + 1])
  local cur = scores[n]
  if done[id] or not tag or not cur or to_us(cur) % 1000 ~= tag or redis.call('HEXISTS', KEYS[2], id) == 0 then
    out[n] = 0
  else
    out[n] = 1
    done[id] = true
    if kind == '1' or kind == '2' then
      -- whole milliseconds: a due time never carries a lease tag
      local at = floor_ms(now) + tonumber(ARGV[i + 3]) * 1000
      zadd[#zadd + 1] = secs(at)
      zadd[#zadd + 1] = id
      if not earliest or at < earliest then
        earliest = at
      end
    else
      if kind == '3' and KEYS[3] then
        local env = redis.call('HGET', KEYS[2], id)
        redis.call('ZADD', KEYS[3], fmt(math.floor(now / 1000)), id)
        redis.call('HSET', KEYS[4], id, dead_record(1, due, ARGV[i + 4], ARGV[i + 5], env))
      end
      del[#del + 1] = id
    end
  end
end
if #del > 0 then
  batched('ZREM', KEYS[1], del)
  batched('HDEL', KEYS[2], del)
end
if #zadd > 0 then
  batched('ZADD', KEYS[1], zadd)
end
if earliest and (not old or earliest / 1000000 < old) then
  redis.call('PUBLISH', ARGV[1], fmt(earliest / 1000))
end
return out
