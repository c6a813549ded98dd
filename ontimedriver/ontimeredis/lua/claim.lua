-- claim.lua: lease up to max due timers, oldest first.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] token counter,
-- KEYS[5] dead zset, KEYS[6] dead hash, KEYS[7] the topic index (one Redis
-- only; absent on a Redis Cluster)
-- ARGV[1] max, ARGV[2] lease ms, ARGV[3] topic
-- Returns {now us, lease deadline ms, next claimable ms or "", first token,
-- then per claimed timer: id, attempt, record}. The k-th claimed timer's
-- token is first token + k - 1 (k from 0): tokens are not sent one by one.
-- The record is not rewritten: the claim writes only the lease entry and
-- the due score. The topic's index entry is set to the next claimable
-- instant, or removed when the topic holds no timer (KEYS[7]; on a Cluster
-- the driver does).
--
-- This script runs for every batch a worker takes, so its per-timer work
-- is kept small: counters instead of #t, one string built per timer (the
-- padded lease entry), numbers concatenated directly where they cannot reach
-- Lua's 14-digit %.14g limit.
local now, sub = clock()
local deadline = now + tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local nids = #ids
local out = {now * 1000 + sub, deadline, '', ''}
if nids > 0 then
  local seq = redis.call('INCRBY', KEYS[4], nids) - nids + 1
  out[4] = fmt(seq)
  local recs = redis.call('HMGET', KEYS[2], unpack(ids))
  local leases = redis.call('HMGET', KEYS[3], unpack(ids))
  -- tokens below 1e14 print exactly with '..' (%.14g); fmt beyond
  local exact = seq + nids < 1e14
  local dl = fmt(deadline)
  -- attempt numbers as strings, each printed once (most are 1)
  local astr = {}
  local gone, lset, zadd = {}, {}, {}
  local ng, nl, no, k = 0, 0, 4, 0
  for i = 1, nids do
    local id, rec = ids[i], recs[i]
    local e, a
    if rec then
      e, a = header(rec)
    end
    if not rec then
      -- an orphan: an id without a body is removed.
      ng = ng + 1
      gone[ng] = id
    elseif not e then
      -- a record without a well-formed ontime header (written by something
      -- else, or damaged): kept whole as a dead letter, never retried.
      ng = ng + 1
      gone[ng] = id
      redis.call('HDEL', KEYS[2], id)
      redis.call('ZADD', KEYS[5], now, id)
      redis.call('HSET', KEYS[6], id, dead_record(0, now, 'undecodable', 'stored record has no well-formed ontime header', rec))
    else
      -- an expired lease carries the attempts counted since the record
      local l = leases[i]
      if l then
        a = string.match(l, '^[^,]*,(%d+)') or a
      end
      local attempt = tonumber(a) + 1
      local token = seq + k
      k = k + 1
      if not exact then
        token = fmt(token)
      end
      lset[nl + 1] = id
      local as = astr[attempt]
      if not as then
        as = fmt(attempt)
        astr[attempt] = as
      end
      lset[nl + 2] = token .. ',' .. as .. LEASE_PAD
      zadd[nl + 1] = dl
      zadd[nl + 2] = id
      nl = nl + 2
      out[no + 1] = id
      out[no + 2] = attempt
      out[no + 3] = rec
      no = no + 3
    end
  end
  if ng > 0 then
    redis.call('ZREM', KEYS[1], unpack(gone))
    redis.call('HDEL', KEYS[3], unpack(gone))
  end
  if nl > 0 then
    redis.call('HSET', KEYS[3], unpack(lset))
    redis.call('ZADD', KEYS[1], unpack(zadd))
  end
end
local nxt = idx_exact(KEYS[7], ARGV[3], KEYS[1])
if nxt then
  out[3] = fmt(nxt)
end
return out
