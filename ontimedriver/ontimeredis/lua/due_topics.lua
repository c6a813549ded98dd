-- due_topics.lua: the topics of the index that are due (at or before the
-- store's now plus a horizon), and the next one.
-- KEYS[1] index zset (topic → the instant its next timer becomes
-- claimable, ms)
-- ARGV[1] limit, ARGV[2] scan cap: at most this many entries are read in
-- each part (the due topics, the next one), ARGV[3] the horizon, ms,
-- ARGV[4] the pattern's form:
--   "a"  every topic (no more ARGV)
--   "e"  exactly one topic: ARGV[5] (no wildcard)
--   "x"  no '*': ARGV[5] is an anchored Lua pattern for the whole topic
--   "g"  with '*': ARGV[5] anchored Lua pattern of the part before the
--        first '*' ("" if none), ARGV[6] anchored (both ends) Lua pattern
--        of the part after the last '*' ("" if none) and ARGV[7] its
--        length, then one unanchored Lua pattern per part between stars
-- The parts between stars are found leftmost, one after another, so a
-- match costs O(topic length × pattern length), never the backtracking
-- of a Lua pattern with several '.*'.
-- Returns {clock us, next ms or "", then per due topic, earliest first,
-- the topic and its instant (ms)}. Next is
-- "" when no later entry matches, or none did among the first cap (or the
-- due part gave up before it reached the end of the due entries).
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[3])
local out = {tonumber(t[1]) * 1000000 + tonumber(t[2]), ''}
local limit, cap, form = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[4]
local idx = KEYS[1]
if form == 'a' then
  local r = redis.call('ZRANGEBYSCORE', idx, '-inf', ms, 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #r do
    out[i + 2] = r[i]
  end
  local nx = redis.call('ZRANGEBYSCORE', idx, '(' .. ms, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if nx[2] then
    out[2] = nx[2]
  end
  return out
end

if form == 'e' then
  local sc = redis.call('ZSCORE', idx, ARGV[5])
  if sc then
    if tonumber(sc) <= ms then
      out[3] = ARGV[5]
      out[4] = sc
    else
      out[2] = sc
    end
  end
  return out
end

local find = string.find
local pre, suf, suflen = ARGV[5], ARGV[6] or '', tonumber(ARGV[7] or '0')
local mids = {}
for i = 8, #ARGV do
  mids[#mids + 1] = ARGV[i]
end
local star = form == 'g'
local function match(s)
  -- a shard of a sharded topic ("<topic>#<i>.<k>") matches as its topic
  local h = find(s, '#', 1, true)
  if h then
    s = string.sub(s, 1, h - 1)
  end
  local pos = 1
  if pre ~= '' then
    local b, e = find(s, pre)
    if not b then
      return false
    end
    pos = e + 1
  end
  if not star then
    return true
  end
  for k = 1, #mids do
    local b, e = find(s, mids[k], pos)
    if not b then
      return false
    end
    pos = e + 1
  end
  if suflen > 0 then
    local st = #s - suflen + 1
    if st < pos then
      return false
    end
    return find(s, suf, st) ~= nil
  end
  return true
end

-- entries are read in chunks that grow (a first match is often near),
-- from about limit up to 256
local chunk = math.max(16, math.min(limit, 256))
-- the due topics
local found, seen, complete = 0, 0, false
while found < limit do
  if seen >= cap then
    break
  end
  local n = math.min(chunk, cap - seen)
  chunk = math.min(chunk * 2, 256)
  local r = redis.call('ZRANGEBYSCORE', idx, '-inf', ms, 'WITHSCORES', 'LIMIT', seen, n)
  seen = seen + #r / 2
  for i = 1, #r, 2 do
    if match(r[i]) then
      found = found + 1
      out[2 * found + 1] = r[i]
      out[2 * found + 2] = r[i + 1]
      if found == limit then
        break
      end
    end
  end
  if #r < 2 * n then
    complete = true
    break
  end
end
if found < limit and not complete then
  -- gave up among many due topics that do not match: no Next, the
  -- caller polls
  return out
end
-- the next one
seen = 0
chunk = 16
while seen < cap do
  local n = math.min(chunk, cap - seen)
  chunk = math.min(chunk * 2, 256)
  local r = redis.call('ZRANGEBYSCORE', idx, '(' .. ms, '+inf', 'WITHSCORES', 'LIMIT', seen, n)
  seen = seen + #r / 2
  for i = 1, #r, 2 do
    if match(r[i]) then
      out[2] = r[i + 1]
      return out
    end
  end
  if #r < 2 * n then
    break
  end
end
return out
