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
-- Wake Go workers on every publish, with the new timers' earliest due time:
-- Python publishers send no wake-up, so the Go workers may know nothing of
-- the timers ahead of this one (a Python timer published after their last
-- claim), and a wake-up sent only when this timer is the new head would
-- leave it waiting behind such a timer for their poll. The script cannot
-- tell which timers the workers know (that would take a key Python does
-- not know), so it always sends; a worker that will wake earlier anyway
-- ignores it without a store call. When the head is already due (a Python
-- timer nobody has claimed), the wake-up is for it: the workers claim it at
-- once and learn the rest.
if earliest then
  local at = earliest / 1000
  if old and old * 1000000 <= now and old * 1000 < at then
    at = math.floor(old * 1000)
  end
  redis.call('PUBLISH', ARGV[2], fmt(at))
end
return out
