-- recur_pause.lua: pause or resume a recurring timer.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] schedule
-- hash, KEYS[5] the topic index (one Redis only; absent on a Redis
-- Cluster)
-- ARGV[1] "1" pause, "0" resume, ARGV[2] wake channel, ARGV[3] topic,
-- ARGV[4] id; to resume, ARGV[5] the next tick's due ms, ARGV[6] its
-- number, ARGV[7] its scheduled instant ms
-- Returns {0 when there is no recurring timer with the id, 1 when done; the
-- clock (us); the index hint ("" when the topic's head did not move
-- earlier)}.
-- Pausing moves an unleased tick's score to PAUSED; a leased tick keeps
-- its lease (settle arms the next tick at PAUSED). Resuming rewrites an
-- unleased tick as the given next tick; a leased one arms its next tick
-- when settled.
local now, sub = clock()
local id = ARGV[4]
local se = redis.call('HGET', KEYS[4], id)
local rec = redis.call('HGET', KEYS[2], id)
if not se or not rec then
  return {0, now * 1000 + sub, ''}
end
local tick, at, paused, rest = string.match(se, '^(%d+),(%-?%d+),(%d),(.*)$')
if not tick then
  return {0, now * 1000 + sub, ''}
end
if paused == ARGV[1] then
  return {1, now * 1000 + sub, ''}
end
local leased = redis.call('HEXISTS', KEYS[3], id) == 1
if ARGV[1] == '1' then
  redis.call('HSET', KEYS[4], id, tick .. ',' .. at .. ',1,' .. rest)
  if not leased then
    redis.call('ZADD', KEYS[1], fmt(PAUSED), id)
  end
  return {1, now * 1000 + sub, ''}
end
if leased then
  redis.call('HSET', KEYS[4], id, tick .. ',' .. at .. ',0,' .. rest)
  return {1, now * 1000 + sub, ''}
end
local r = parse(rec)
if not r then
  return {0, now * 1000 + sub, ''}
end
local due = tonumber(ARGV[5])
local old = head(KEYS[1])
redis.call('HSET', KEYS[4], id, ARGV[6] .. ',' .. ARGV[7] .. ',0,' .. rest)
redis.call('HSET', KEYS[2], id, record(0, due, '', r.payload))
redis.call('ZADD', KEYS[1], ARGV[5], id)
local low = due
if old and old < low then
  low = old
end
idx_lower(KEYS[5], ARGV[3], low)
if not old or due < old then
  redis.call('PUBLISH', ARGV[2], fmt(due))
end
return {1, now * 1000 + sub, fmt(low)}
