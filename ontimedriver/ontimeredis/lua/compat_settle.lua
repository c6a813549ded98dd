-- compat_settle.lua: apply outcomes, each fenced by its lease tag.
-- KEYS[1] timeline zset, KEYS[2] payloads hash, and when dead letters are
-- enabled KEYS[3] dead zset, KEYS[4] dead hash
-- ARGV[1] wake channel
-- then per outcome: kind (0 ack, 1 retry, 2 snooze, 3 dead), id, token
-- followed by ",", and for every kind but ack three more values: delay as
-- "<ms>:<us>" (see due_after), reason, error text
-- Returns one integer per outcome: 1 applied, 0 lease lost.
local out = {}
local n, q, kinds, toks, pos = outcomes(2)
local scores = many('ZMSCORE', KEYS[1], q)
local done = {}
local del, zadd = {}, {}
local nd, nz = 0, 0
local now, earliest
for j = 1, n do
  local id, kind, cur = q[j], kinds[j], scores[j]
  -- the token is "<tag>:<due ms>,"
  local tag, due = string.match(toks[j], '^(%d+):(%-?%d+),$')
  if done[id] or not tag or not cur or to_us(cur) % 1000 ~= tonumber(tag) or redis.call('HEXISTS', KEYS[2], id) == 0 then
    out[j] = 0
  else
    out[j] = 1
    done[id] = true
    if kind == '1' or kind == '2' then
      if not now then
        now = now_us()
      end
      -- whole milliseconds: a due time never carries a lease tag
      local at = due_after(math.floor(now / 1000), now % 1000, ARGV[pos[j] + 3]) * 1000
      zadd[nz + 1] = secs(at)
      zadd[nz + 2] = id
      nz = nz + 2
      if not earliest or at < earliest then
        earliest = at
      end
    else
      if kind == '3' and KEYS[3] then
        if not now then
          now = now_us()
        end
        local p = pos[j]
        local env = redis.call('HGET', KEYS[2], id)
        redis.call('ZADD', KEYS[3], fmt(math.floor(now / 1000)), id)
        redis.call('HSET', KEYS[4], id, dead_record(1, tonumber(due), ARGV[p + 4], ARGV[p + 5], env))
      end
      nd = nd + 1
      del[nd] = id
    end
  end
end
if nd > 0 then
  batched('ZREM', KEYS[1], del)
  batched('HDEL', KEYS[2], del)
end
if nz > 0 then
  batched('ZADD', KEYS[1], zadd)
end
-- A retry or snooze wakes the Go workers whatever the head is, as a
-- publish does (compat_schedule.lua): a Python timer the workers do not
-- know of may be ahead of it.
if earliest then
  redis.call('PUBLISH', ARGV[1], fmt(earliest / 1000))
end
return out
