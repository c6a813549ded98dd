-- claim.lua: lease up to max due timers, oldest first.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] token counter,
-- KEYS[5] dead zset, KEYS[6] dead hash, KEYS[7] schedule hash (recurring
-- timers), KEYS[8] the topic index (one Redis only; absent on a Redis
-- Cluster)
-- ARGV[1] max, ARGV[2] lease ms, ARGV[3] topic, and for a claim across
-- the shards of a sharded topic (see shard.go) ARGV[4] the lease deadline
-- (ms; used when after now) and ARGV[5] the latest due score to claim
-- Returns {now us, lease deadline ms, next claimable ms or "", first token,
-- count n of claimed timers, then per claimed timer: id, record, then for
-- the claimed timers whose attempt is not the record's attempt + 1 (an
-- expired lease counted more): index k (from 0), attempt; then for the
-- claimed timers that are recurring: -(k+1), schedule entry}. The k-th
-- claimed timer's token is first token + k: tokens are not sent one by
-- one, nor the usual attempts.
-- The record is not rewritten: the claim writes only the lease entry and
-- the due score. The topic's index entry is set to the next claimable
-- instant, or removed when the topic holds no timer (KEYS[8]; on a Cluster
-- the driver does).
--
-- This script runs for every batch a worker takes, so its per-timer work
-- is kept small: counters instead of #t, one string built per timer (the
-- lease entry), no number printed per timer (a token is printed as its
-- digits but the last, once per ten tokens, and a digit from a table), no
-- string created to read a record's header.
local now, sub = clock()
local deadline = now + tonumber(ARGV[2])
local upto = now
if ARGV[4] then
  local fixed, cap = tonumber(ARGV[4]), tonumber(ARGV[5])
  if fixed > now then
    deadline = fixed
  end
  if cap < upto then
    upto = cap
  end
end
-- numbers are passed to commands as strings printed by fmt: Redis would
-- print a Lua number with %.17g
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', fmt(upto), 'LIMIT', '0', ARGV[1])
local nids = #ids
local out = {now * 1000 + sub, deadline, '', '', 0}
if nids > 0 then
  local seq = redis.call('INCRBY', KEYS[4], fmt(nids)) - nids + 1
  out[4] = fmt(seq)
  local recs = redis.call('HMGET', KEYS[2], unpack(ids))
  local leases = redis.call('HMGET', KEYS[3], unpack(ids))
  local dl = fmt(deadline)
  -- attempt numbers as strings, each printed once (most are 1)
  local astr = {}
  -- the last digit of a token; the digits before it are printed once per
  -- ten tokens (a constant table of ten: cheaper to build per call than
  -- one of a hundred, which costs more than it saves in small batches)
  local D1 = {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}
  local pre
  -- only the first entry written into a lease hash that is not yet a hash
  -- table is padded (see common.lua): that converts it, and Redis never
  -- converts a hash table back, so the other entries stay short
  local pad = LEASE_PAD
  if redis.call('OBJECT', 'ENCODING', KEYS[3]) == 'hashtable' then
    pad = ''
  end
  local gone, lset, zadd, over = {}, {}, {}, {}
  local ng, nl, no, k, nov = 0, 0, 5, 0, 0
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
      local attempt = a + 1
      -- an expired lease carries the attempts counted since the record
      local l = leases[i]
      if l then
        local la = tonumber(string.match(l, '^[^,]*,(%d+)'))
        if la and la ~= a then
          attempt = la + 1
          over[nov + 1] = k
          over[nov + 2] = attempt
          nov = nov + 2
        end
      end
      local token = seq + k
      k = k + 1
      local as = astr[attempt]
      if not as then
        as = fmt(attempt)
        astr[attempt] = as
      end
      local entry
      if token < 10 then
        entry = fmt(token) .. ',' .. as .. pad
      else
        local r = token % 10
        if r == 0 or not pre then
          pre = fmt((token - r) / 10)
        end
        entry = pre .. D1[r + 1] .. ',' .. as .. pad
      end
      pad = ''
      lset[nl + 1] = id
      lset[nl + 2] = entry
      zadd[nl + 1] = dl
      zadd[nl + 2] = id
      nl = nl + 2
      out[no + 1] = id
      out[no + 2] = rec
      no = no + 2
    end
  end
  out[5] = k
  for j = 1, nov do
    out[no + j] = over[j]
  end
  no = no + nov
  -- recurring timers: one EXISTS per claim when the topic has none
  if k > 0 and redis.call('EXISTS', KEYS[7]) == 1 then
    local cl = {}
    for j = 1, nl / 2 do
      cl[j] = lset[2 * j - 1]
    end
    local se = redis.call('HMGET', KEYS[7], unpack(cl))
    for j = 1, #cl do
      if se[j] then
        out[no + 1] = -j
        out[no + 2] = se[j]
        no = no + 2
      end
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
local nxt = idx_exact(KEYS[8], ARGV[3], KEYS[1])
if nxt then
  out[3] = fmt(nxt)
end
return out
