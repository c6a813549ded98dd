-- common.lua: helpers prepended to every native script (not a script itself).
-- A record (the value in the msg hash) is
--   <attempt>,<dueMs>,<errLen>:<err bytes><envelope bytes>
-- and is written when a timer is scheduled, retried, snoozed or replayed,
-- never by a claim. While a timer is leased the lease hash holds
--   <token>,<attempt>,<padding>
-- (the attempt counted by the claims since the record was written). The
-- padding makes every entry longer than Redis's hash-max-listpack-value
-- (64), so the lease hash is a hash table, never the compact listpack
-- whose every lookup scans the whole list; entries written before the
-- padding, <token>,<attempt>, are read the same way.
local LEASE_PAD = ',' .. string.rep('.', 64)

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- header checks a record's header exactly as Go's parseRecord reads it
-- (digit counts that fit its integers, an error length within the record)
-- and returns the header's end, attempt, due and error length, or nil.
-- Whatever it accepts, the Go side can parse.
local function header(rec)
  local s, e, a, due, el = string.find(rec, '^(%d+),(%-?%d+),(%d+):')
  if not s or #a > 9 or #due > 17 or #el > 10 then
    return nil
  end
  el = tonumber(el)
  if e + el > #rec then
    return nil
  end
  return e, a, due, el
end

local function parse(rec)
  local e, a, due, el = header(rec)
  if not e then
    return nil
  end
  return {
    attempt = tonumber(a),
    due = tonumber(due),
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
