-- common.lua: helpers prepended to every native script (not a script itself).
-- A record (the value in the msg hash) is
--   <attempt>,<dueMs>,<errLen>:<err bytes><envelope bytes>
-- and is written when a timer is scheduled, retried, snoozed or replayed,
-- never by a claim. While a timer is leased the lease hash holds
--   <token>,<attempt>,<padding>
-- (the attempt counted by the claims since the record was written). The
-- padding makes an entry longer than Redis's hash-max-listpack-value (64),
-- so that the lease hash is a hash table, never the compact listpack whose
-- every lookup scans the whole list. Redis never converts a hash table
-- back, so a claim pads only the first entry it writes into a lease hash
-- that is not a hash table (absent, or loaded as a listpack from a
-- snapshot); the other entries are <token>,<attempt>, as ontime wrote
-- them before the padding, and every entry is read the same way.
-- (a comma and 64 dots, written out: a constant, not built per call)
local LEASE_PAD = ',................................................................'

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- header checks a record's header exactly as Go's parseRecord reads it
-- (digit counts that fit its integers, an error length within the record)
-- and returns the header's end, the attempt and the error length (numbers)
-- and the positions of the header's two commas, or nil. Whatever it
-- accepts, the Go side can parse. It runs for every claimed timer, so it
-- creates no string for the usual header (one-digit attempt and error
-- length): position captures, and string.byte for one-digit fields.
local function header(rec)
  local s, e, c1, c2 = sfind(rec, '^%d+(),%-?%d+(),%d+:')
  -- at most 9 attempt, 17 due (sign included) and 10 error-length digits
  if not s or c1 > 10 or c2 - c1 > 18 or e - c2 > 11 then
    return nil
  end
  local el
  if e - c2 == 2 then
    el = sbyte(rec, e - 1) - 48
  else
    el = tonumber(string.sub(rec, c2 + 1, e - 1))
  end
  if e + el > #rec then
    return nil
  end
  local a
  if c1 == 2 then
    a = sbyte(rec, 1) - 48
  else
    a = tonumber(string.sub(rec, 1, c1 - 1))
  end
  return e, a, el, c1, c2
end

local function parse(rec)
  local e, a, el, c1, c2 = header(rec)
  if not e then
    return nil
  end
  return {
    attempt = a,
    due = tonumber(string.sub(rec, c1 + 1, c2 - 1)),
    err = string.sub(rec, e + 1, e + el),
    payload = string.sub(rec, e + el + 1),
  }
end

local function record(attempt, due, err, payload)
  return fmt(attempt) .. ',' .. fmt(due) .. ',' .. #err .. ':' .. err .. payload
end

-- lease_attempt returns the attempt of a lease entry whose token takes
-- its first n bytes (the comma after the token included).
local function lease_attempt(entry, n)
  return tonumber(string.match(entry, '^%d+', n + 1))
end

-- held reports whether a lease entry carries token, and its attempt.
local function held(entry, token)
  if not entry or token == '' or string.sub(entry, 1, #token + 1) ~= token .. ',' then
    return false
  end
  return true, lease_attempt(entry, #token + 1)
end

-- The topic index (P{topics}:next: topic → the instant its next timer
-- becomes claimable, a lower bound; see doc.go). On one Redis the scripts
-- keep it themselves, atomically: the driver passes the index key as the
-- script's last KEYS entry (idx below) and the topic as an ARGV. On a Redis
-- Cluster the index lives in another slot, idx is nil, and the script
-- returns what the driver then writes as a hint (lua/hint.lua).

-- idx_exact sets the topic's entry to the head of its due zset, or removes
-- it when the zset is empty, and returns the head (nil when empty).
local function idx_exact(idx, topic, due)
  local h = head(due)
  if idx then
    if h then
      redis.call('ZADD', idx, fmt(h), topic)
    else
      redis.call('ZREM', idx, topic)
    end
  end
  return h
end

-- idx_lower lowers the topic's entry to score (or adds it): an earlier
-- timer was written.
local function idx_lower(idx, topic, score)
  if idx then
    redis.call('ZADD', idx, 'LT', fmt(score), topic)
  end
end

-- PAUSED is the score of a paused recurring timer's tick: the last
-- millisecond of year 9999 (ontimedriver.MaxDue), never claimable.
local PAUSED = 253402300799999
