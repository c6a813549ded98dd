-- hint.lua: write topic index hints on a Redis Cluster, where the scripts
-- of a topic cannot write the index (it lives in another slot): each topic
-- script returns what changed with its clock (TIME in microseconds) as the
-- version, and the driver writes it here afterwards. The scripts of one
-- topic run one after another on one node, so their versions grow (except
-- across a failover to a node whose clock is behind).
-- KEYS[1] index zset (topic → ms), KEYS[2] versions hash (topic → us)
-- ARGV[1] the topic-wake channel ("" for none), then per hint 4 values:
--   topic, version, op, score ms
--   op "l" (lower): ZADD LT, always (an entry too low is allowed: it costs
--      one claim that finds nothing); the version is kept when newer
--   op "s" (set) and "r" (remove): exact, applied only when the version is
--      newer than the stored one, so that an older exact hint arriving late
--      cannot raise the entry above a timer written after it
--   op "w": "s" after a call that may have made the topic's head earlier
--      (a settle with retries or snoozes)
-- When ARGV[1] is not empty, the topic's wake-up "<ms> <topic>" is
-- published there with SPUBLISH for every "l" and "w" hint (the driver
-- sends "l" only when the topic's head moved earlier or the topic was
-- empty: the entry may already be lower, as an entry may be too low, and
-- a worker that runs the topic must still hear of the new head), and for
-- an "s" hint that adds the entry or makes it earlier. The channel shares
-- the index's hash tag, so a pattern subscriber on a Cluster with sharded
-- pub/sub listens to one channel on one master for every topic (see hub).
-- Returns how many hints were applied.
local applied = 0
local wake = ARGV[1]
for i = 2, #ARGV, 4 do
  local topic, v, op = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local cur = redis.call('HGET', KEYS[2], topic)
  local newer = not cur or v > tonumber(cur)
  if op == 'l' then
    redis.call('ZADD', KEYS[1], 'LT', ARGV[i + 3], topic)
    if wake ~= '' then
      redis.call('SPUBLISH', wake, ARGV[i + 3] .. ' ' .. topic)
    end
    applied = applied + 1
  elseif newer then
    if op == 's' or op == 'w' then
      local old = wake ~= '' and op == 's' and redis.call('ZSCORE', KEYS[1], topic)
      redis.call('ZADD', KEYS[1], ARGV[i + 3], topic)
      if wake ~= '' and (op == 'w' or not old or tonumber(ARGV[i + 3]) < tonumber(old)) then
        redis.call('SPUBLISH', wake, ARGV[i + 3] .. ' ' .. topic)
      end
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
