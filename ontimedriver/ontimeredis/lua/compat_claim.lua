-- compat_claim.lua: lease up to max due timers, oldest first.
-- KEYS[1] timeline zset, KEYS[2] payloads hash
-- ARGV[1] max, ARGV[2] lease us (whole milliseconds)
-- Returns {now us, next claimable score or "", then per claimed
-- timer: id, token, score it had, lease deadline us, envelope}.
local now = now_us()
-- Due at the store clock's full resolution, the microsecond: a score is due
-- once score_us(score) <= now. ZRANGEBYSCORE compares doubles against the
-- double nearest to secs(now); the loop below keeps exactly the ids whose
-- score_us is due (it drops none unless that double rounded up).
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', secs(now), 'LIMIT', 0, tonumber(ARGV[1]))
local out = {now, ''}
local scores
if #ids > 0 then
  scores = redis.call('ZMSCORE', KEYS[1], unpack(ids))
  local n = #ids
  while n > 0 and score_us(scores[n]) > now do
    ids[n], scores[n] = nil, nil
    n = n - 1
  end
end
if ids[1] then
  local envs = redis.call('HMGET', KEYS[2], unpack(ids))
  local gone, zadd = {}, {}
  local ng, nz, no = 0, 0, 2
  -- Every deadline is base + tag, base a whole millisecond: its score is
  -- the base's seconds and milliseconds, printed once, then the tag's three
  -- digits. Tags and the due milliseconds of the scores seen are printed
  -- once each (a batch's timers mostly share them).
  local base = lease_us(now, tonumber(ARGV[2]), 0)
  local bs = math.floor(base / 1000000)
  local prefix = string.format('%.0f.%03d', bs, (base - bs * 1000000) / 1000)
  local tagstr, duems = {}, {}
  for i = 1, #ids do
    local id, env = ids[i], envs[i]
    if not env then
      -- an orphan: an id without a body is removed, as Python does.
      ng = ng + 1
      gone[ng] = id
    else
      local old = scores[i]
      local old_us = to_us(old)
      local tag = next_tag(old_us, now)
      local ts = tagstr[tag]
      if not ts then
        ts = string.format('%03d', tag)
        tagstr[tag] = ts
      end
      local dm = duems[old]
      if not dm then
        dm = fmt(math.floor(old_us / 1000))
        duems[old] = dm
      end
      zadd[nz + 1] = prefix .. ts
      zadd[nz + 2] = id
      nz = nz + 2
      out[no + 1] = id
      out[no + 2] = tag .. ':' .. dm
      out[no + 3] = old
      out[no + 4] = base + tag
      out[no + 5] = env
      no = no + 5
    end
  end
  if ng > 0 then
    redis.call('ZREM', KEYS[1], unpack(gone))
  end
  if nz > 0 then
    redis.call('ZADD', KEYS[1], unpack(zadd))
  end
end
local h = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if h[2] then
  out[2] = h[2]
end
return out
