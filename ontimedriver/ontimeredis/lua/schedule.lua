-- schedule.lua: write a batch of timers.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] schedule
-- hash (recurring timers), KEYS[5] the topic's shard count key (set when
-- the topic is sharded: then its timers live in its shards' keys, and
-- writing here is refused), KEYS[6] the topic index and KEYS[7] the topic
-- registry (one Redis only; absent on a Redis Cluster, where the driver
-- adds the topic to the registry after)
-- ARGV[1] mode: "0" upsert, "1" if absent
-- ARGV[2] wake channel
-- ARGV[3] topic
-- then per timer 3 values: id, due (absolute ms, or "+" and a delay from
-- the store's clock as "<ms>:<us>", see due_after), envelope
-- Returns one due ms per timer, or -1 when the id exists (if absent), then
-- the clock (us) and the index hint: the earliest due of the written timers
-- when it is earlier than the old head or the topic held nothing, else ""
-- (the head did not move earlier: the entry, at most the head, stands).
-- On one Redis the index entry is lowered here (KEYS[6]) to the earlier
-- of the two, which also repairs a missing entry; on a Cluster the driver
-- writes the hint.
-- An upsert drops any lease of the id: its token stops working.
local shards = redis.call('GET', KEYS[5])
if shards then
  return redis.error_reply('ONTIMESHARDS ' .. shards)
end
local now, sub = clock()
local old = head(KEYS[1])
local ifabsent = ARGV[1] == '1'
local out = {}
local earliest = nil
local hset, zadd, ids = {}, {}, {}
local exists = {}
local nargs = #ARGV
if ifabsent then
  local q = {}
  local k = 0
  for i = 4, nargs, 3 do
    k = k + 1
    q[k] = ARGV[i]
  end
  local r = many('HMGET', KEYS[2], q)
  for j = 1, k do
    exists[j] = r[j] ~= false
  end
end
local n, m = 0, 0
local seen = {}
-- timers of one batch mostly share a due time: its record header and its
-- score (a string: Redis would print a Lua number with %.17g for every
-- timer) are built once
local hdue, hdr, score
-- and a relative due time is computed once per distinct delay
local lspec, ldue
for i = 4, nargs, 3 do
  n = n + 1
  local id = ARGV[i]
  if exists[n] or (ifabsent and seen[id]) then
    out[n] = -1
  else
    local spec = ARGV[i + 1]
    local due
    if spec == lspec then
      due = ldue
    else
      if string.byte(spec, 1) == 43 then -- '+': relative
        due = due_after(now, sub, string.sub(spec, 2))
      else
        due = tonumber(spec)
      end
      lspec, ldue = spec, due
    end
    if ifabsent then
      seen[id] = true
    end
    if due ~= hdue then
      score = fmt(due)
      hdue, hdr = due, '0,' .. score .. ',0:'
    end
    m = m + 1
    ids[m] = id
    hset[2 * m - 1] = id
    hset[2 * m] = hdr .. ARGV[i + 2]
    zadd[2 * m - 1] = score
    zadd[2 * m] = id
    if not earliest or due < earliest then
      earliest = due
    end
    out[n] = due
  end
end
if m > 0 then
  batched('HSET', KEYS[2], hset)
  batched('ZADD', KEYS[1], zadd)
  if redis.call('EXISTS', KEYS[3]) == 1 then
    batched('HDEL', KEYS[3], ids)
  end
  -- a plain timer over a recurring one's id ends its schedule
  if redis.call('EXISTS', KEYS[4]) == 1 then
    batched('HDEL', KEYS[4], ids)
  end
  -- in the registry for as long as the topic has keys: Topics prunes an
  -- empty topic atomically (prune.lua), so this write and that prune
  -- cannot cross
  if KEYS[7] then
    redis.call('SADD', KEYS[7], ARGV[3])
  end
end
local low = ''
if m > 0 then
  -- the old head too: the entry may be missing (written before the index
  -- existed, or lost), and it must never be above the head
  low = earliest
  if old and old < low then
    low = old
  end
  idx_lower(KEYS[6], ARGV[3], low)
  -- the hint the driver writes on a Cluster, where that write costs a
  -- round trip: only when the head moved earlier (or the topic was empty)
  if not old or earliest < old then
    low = fmt(low)
  else
    low = ''
  end
end
if earliest and (not old or earliest < old) then
  redis.call('PUBLISH', ARGV[2], fmt(earliest))
end
out[n + 1] = now * 1000 + sub
out[n + 2] = low
return out
