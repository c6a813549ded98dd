-- compat_schedule.lua: ZADD + HSET per timer, as the Python publisher does.
-- KEYS[1] timeline zset, KEYS[2] payloads hash
-- ARGV[1] mode: "0" upsert, "1" if absent; ARGV[2] wake channel
-- then per timer 3 values: id, due (absolute us, a whole millisecond, or
-- "+" and a delay from the store's clock as "<ms>:<us>", see due_after),
-- envelope
-- Returns one due us per timer (the stored score's instant, score_us), or
-- -1 when the id exists (if absent).
local now = now_us()
local old = head(KEYS[1])
local ifabsent = ARGV[1] == '1'
local out = {}
local earliest = nil
local zadd, hset, seen = {}, {}, {}
local n, m = 0, 0
-- timers of one batch mostly share a due time: its score is formatted once
local sdue, score, sdue_us
for i = 3, #ARGV, 3 do
  local id = ARGV[i]
  n = n + 1
  if ifabsent and (seen[id] or redis.call('HEXISTS', KEYS[2], id) == 1) then
    out[n] = -1
  else
    if ifabsent then
      seen[id] = true
    end
    local spec = ARGV[i + 1]
    local due
    if string.byte(spec, 1) == 43 then -- '+': relative
      -- whole milliseconds, rounded up: due times written by ontime never
      -- carry a lease tag, and are never claimable early
      due = due_after(math.floor(now / 1000), now % 1000, string.sub(spec, 2)) * 1000
    else
      due = tonumber(spec)
    end
    if due ~= sdue then
      sdue, score = due, secs(due)
      sdue_us = score_us(score)
    end
    zadd[2 * m + 1] = score
    zadd[2 * m + 2] = id
    hset[2 * m + 1] = id
    hset[2 * m + 2] = ARGV[i + 2]
    m = m + 1
    if not earliest or due < earliest then
      earliest = due
    end
    out[n] = sdue_us
  end
end
if m > 0 then
  batched('ZADD', KEYS[1], zadd)
  batched('HSET', KEYS[2], hset)
end
-- Wake Go workers when the new timer comes before the head, and also when
-- the head is already due: Python publishers send no wake-up, so a Python
-- timer can be due and unclaimed at the head while Go workers sleep until
-- their poll; the wake-up (for the earlier of the two) gets them both.
if earliest and (not old or earliest / 1000000 < old) then
  redis.call('PUBLISH', ARGV[2], fmt(earliest / 1000))
elseif earliest and old * 1000000 <= now then
  redis.call('PUBLISH', ARGV[2], fmt(math.floor(old * 1000)))
end
return out
