-- schedule.lua: write a batch of timers.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash
-- ARGV[1] mode: "0" upsert, "1" if absent
-- ARGV[2] wake channel
-- then per timer 4 values: id, absolute due ms ("" = relative), delay ms, envelope
-- Returns one due ms per timer, or -1 when the id exists (if absent).
-- An upsert drops any lease of the id: its token stops working.
local now = now_ms()
local old = head(KEYS[1])
local ifabsent = ARGV[1] == '1'
local out = {}
local earliest = nil
local hset, zadd, ids = {}, {}, {}
local exists = {}
if ifabsent then
  local q = {}
  for i = 3, #ARGV, 4 do
    q[#q + 1] = ARGV[i]
  end
  local r = many('HMGET', KEYS[2], q)
  for k = 1, #q do
    exists[k] = r[k] ~= false
  end
end
local n = 0
local seen = {}
for i = 3, #ARGV, 4 do
  n = n + 1
  local id = ARGV[i]
  if exists[n] or (ifabsent and seen[id]) then
    out[n] = -1
  else
    local due
    if ARGV[i + 1] ~= '' then
      due = tonumber(ARGV[i + 1])
    else
      due = now + tonumber(ARGV[i + 2])
    end
    seen[id] = true
    hset[#hset + 1] = id
    hset[#hset + 1] = record(0, due, '', ARGV[i + 3])
    zadd[#zadd + 1] = due
    zadd[#zadd + 1] = id
    ids[#ids + 1] = id
    if not earliest or due < earliest then
      earliest = due
    end
    out[n] = due
  end
end
if #ids > 0 then
  batched('HSET', KEYS[2], hset)
  batched('ZADD', KEYS[1], zadd)
  if redis.call('EXISTS', KEYS[3]) == 1 then
    batched('HDEL', KEYS[3], ids)
  end
end
if earliest and (not old or earliest < old) then
  redis.call('PUBLISH', ARGV[2], fmt(earliest))
end
return out
