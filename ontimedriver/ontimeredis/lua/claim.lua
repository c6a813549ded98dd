-- claim.lua: lease up to max due timers, oldest first.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] token counter,
-- KEYS[5] dead zset, KEYS[6] dead hash
-- ARGV[1] max, ARGV[2] lease ms
-- Returns {now ms, lease deadline ms, next claimable ms or "", then per
-- claimed timer: id, token, attempt, record}. The record is not rewritten:
-- the claim writes only the lease entry and the due score.
local now = now_ms()
local deadline = now + tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {now, deadline, ''}
if #ids > 0 then
  local seq = redis.call('INCRBY', KEYS[4], #ids) - #ids
  local recs = redis.call('HMGET', KEYS[2], unpack(ids))
  local leases = redis.call('HMGET', KEYS[3], unpack(ids))
  local gone, lset, zadd = {}, {}, {}
  for i, id in ipairs(ids) do
    local rec = recs[i]
    local a
    if rec then
      local e
      e, a = header(rec)
    end
    if not rec then
      -- an orphan: an id without a body is removed.
      gone[#gone + 1] = id
    elseif not a then
      -- a record without a well-formed ontime header (written by something
      -- else, or damaged): kept whole as a dead letter, never retried.
      gone[#gone + 1] = id
      redis.call('HDEL', KEYS[2], id)
      redis.call('ZADD', KEYS[5], now, id)
      redis.call('HSET', KEYS[6], id, dead_record(0, now, 'undecodable', 'stored record has no well-formed ontime header', rec))
    else
      -- an expired lease carries the attempts counted since the record
      local l = leases[i]
      if l then
        a = string.match(l, ',(%d+)$') or a
      end
      local attempt = tonumber(a) + 1
      local token = fmt(seq + i)
      lset[#lset + 1] = id
      lset[#lset + 1] = token .. ',' .. attempt
      zadd[#zadd + 1] = deadline
      zadd[#zadd + 1] = id
      out[#out + 1] = id
      out[#out + 1] = token
      out[#out + 1] = attempt
      out[#out + 1] = rec
    end
  end
  if #gone > 0 then
    redis.call('ZREM', KEYS[1], unpack(gone))
    redis.call('HDEL', KEYS[3], unpack(gone))
  end
  if #lset > 0 then
    redis.call('HSET', KEYS[3], unpack(lset))
    redis.call('ZADD', KEYS[1], unpack(zadd))
  end
end
local nxt = head(KEYS[1])
if nxt then
  out[3] = fmt(nxt)
end
return out
