-- compat_schedule.lua: ZADD + HSET per timer, as the Python publisher does.
-- KEYS[1] timeline zset, KEYS[2] payloads hash
-- ARGV[1] mode: "0" upsert, "1" if absent; ARGV[2] wake channel
-- then per timer 4 values: id, absolute due us ("" = relative), delay us, envelope
-- Returns one due us per timer, or -1 when the id exists (if absent).
local now = now_us()
local old = head(KEYS[1])
local out = {}
local earliest = nil
local zadd, hset, seen = {}, {}, {}
for i = 3, #ARGV, 4 do
  local id = ARGV[i]
  if ARGV[1] == '1' and (seen[id] or redis.call('HEXISTS', KEYS[2], id) == 1) then
    out[#out + 1] = -1
  else
    seen[id] = true
    local due
    if ARGV[i + 1] ~= '' then
      due = tonumber(ARGV[i + 1])
    else
      due = floor_ms(now) + tonumber(ARGV[i + 2])
    end
    zadd[#zadd + 1] = secs(due)
    zadd[#zadd + 1] = id
    hset[#hset + 1] = id
    hset[#hset + 1] = ARGV[i + 3]
    if not earliest or due < earliest then
      earliest = due
    end
    out[#out + 1] = due
  end
end
if #zadd > 0 then
  batched('ZADD', KEYS[1], zadd)
  batched('HSET', KEYS[2], hset)
end
if earliest and (not old or earliest / 1000000 < old) then
  redis.call('PUBLISH', ARGV[2], fmt(earliest / 1000))
end
return out
