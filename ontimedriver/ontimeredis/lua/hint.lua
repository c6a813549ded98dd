-- hint.lua: write topic index hints on a Redis Cluster, where the scripts
-- of a topic cannot write the index (it lives in another slot): each topic
-- script returns what changed with its clock (TIME in microseconds) as the
-- version, and the driver writes it here afterwards. The scripts of one
-- topic run one after another on one node, so their versions grow (except
-- across a failover to a node whose clock is behind).
-- KEYS[1] index zset (topic → ms), KEYS[2] versions hash (topic → us)
-- ARGV: per hint 4 values: topic, version, op, score ms
--   op "l" (lower): ZADD LT, always (an entry too low is allowed: it costs
--      one claim that finds nothing); the version is kept when newer
--   op "s" (set) and "r" (remove): exact, applied only when the version is
--      newer than the stored one, so that an older exact hint arriving late
--      cannot raise the entry above a timer written after it
-- Returns how many hints were applied.
local applied = 0
for i = 1, #ARGV, 4 do
  local topic, v, op = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local cur = redis.call('HGET', KEYS[2], topic)
  local newer = not cur or v > tonumber(cur)
  if op == 'l' then
    redis.call('ZADD', KEYS[1], 'LT', ARGV[i + 3], topic)
    applied = applied + 1
  elseif newer then
    if op == 's' then
      redis.call('ZADD', KEYS[1], ARGV[i + 3], topic)
    else
      redis.call('ZREM', KEYS[1], topic)
    end
    applied = applied + 1
  end
  if newer then
    redis.call('HSET', KEYS[2], topic, ARGV[i + 1])
  end
end
return applied
