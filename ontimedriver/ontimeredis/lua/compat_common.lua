-- compat_common.lua: helpers prepended to every compatible-layout script.
-- Scores are float Unix seconds, as faststream-redis-timers writes them.
-- A lease deadline written by ontime is a whole millisecond plus a tag of
-- 1..999 microseconds: the tag is the lease token. Due times written by
-- ontime are whole milliseconds, so they never carry a tag; Python writes
-- arbitrary microseconds, which match a given tag with probability 1/1000.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function secs(us)
  local s = math.floor(us / 1000000)
  return string.format('%.0f.%06d', s, us - s * 1000000)
end

local function to_us(score)
  return math.floor(tonumber(score) * 1000000 + 0.5)
end

-- score_us is the instant a score stands for, in whole microseconds, the
-- resolution of the store's clock: the nearest one. A double holds no more
-- (a score of today has about 0.24 us of precision, one of year 9999 about
-- 30 us), and the decimal a writer meant, such as ontime's whole
-- milliseconds, is the nearest one. A claim at store time now (us) takes
-- a timer once score_us(score) <= now. The arithmetic is exact: the
-- fraction of a score past 1970 has at most 22 significant bits, and times
-- 10^6 (under 2^20) it still fits a double's 53.
local function score_us(score)
  local s = tonumber(score)
  local sec = math.floor(s)
  return sec * 1000000 + math.floor((s - sec) * 1000000 + 0.5)
end

-- next_tag picks the tag of a new lease. After a lease written by ontime it
-- is the next tag, so consecutive leases of an id never share one; after a
-- due time (no tag) it follows the clock's milliseconds, so two claims less
-- than 999 ms apart never share one either.
local function next_tag(old_us, now_us)
  local t = old_us % 1000
  if t == 0 then
    return math.floor(now_us / 1000) % 999 + 1
  end
  t = t + 1
  if t >= 1000 then
    t = 1
  end
  return t
end

-- floor_ms rounds microseconds down to the millisecond: relative due times
-- and lease deadlines start from the store's clock in whole milliseconds,
-- as in the native layout.
local function floor_ms(us)
  return math.floor(us / 1000) * 1000
end

local function lease_us(now, lease, tag)
  return floor_ms(now) + lease + tag
end

-- A lease token is "<tag>:<due ms>": the tag fences, the due time it
-- carries is what the timer had before the claim (kept for dead letters).
local function parse_token(token)
  local tag, due = string.match(token, '^(%d+):(%-?%d+)$')
  if not tag then
    return nil
  end
  return tonumber(tag), tonumber(due)
end

-- fenced reports whether id is still held under token; it returns the
-- token's tag and due time.
local function fenced(timeline, payloads, id, token)
  local tag, due = parse_token(token)
  if not tag then
    return false
  end
  local cur = redis.call('ZSCORE', timeline, id)
  if not cur or redis.call('HEXISTS', payloads, id) == 0 then
    return false
  end
  if to_us(cur) % 1000 ~= tag then
    return false
  end
  return true, tag, due
end
