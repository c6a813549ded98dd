-- shared.lua: helpers prepended to every script of both layouts (not a
-- script itself).

-- string functions the per-timer loops call, as locals: a global and a
-- field lookup fewer per call
local sfind, sbyte = string.find, string.byte

-- fmt prints an integral number in full (Lua's tostring keeps 14 digits).
-- A positive integer below 2^53 (times, tokens, counts) prints with %d:
-- the same digits as %.0f at a fraction of the cost of glibc's
-- floating-point formatting, which scripts pay several times per call.
local function fmt(n)
  if n >= 1 and n < 9007199254740992 and n % 1 == 0 then
    return string.format('%d', n)
  end
  return string.format('%.0f', n)
end

-- clock returns the store's clock (TIME) as whole Unix milliseconds and
-- the microseconds past them (0..999).
local function clock()
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  return tonumber(t[1]) * 1000 + math.floor(us / 1000), us % 1000
end

-- due_after returns the due time, in whole milliseconds, of a timer due a
-- delay after the clock (ms, sub as clock returns them): the first whole
-- millisecond at or after that instant, so that no claim, which compares
-- the millisecond of its own clock, takes the timer before the store's
-- clock reaches it at its full resolution. The delay is "<ms>:<us>" (us
-- 0..999), split so that no number passes 2^53. A zero delay (due now) is
-- due at ms, claimable at once: a claim that takes it runs after this
-- script, so never before the instant it was published.
local function due_after(ms, sub, delay)
  local dms, dus = string.match(delay, '^(%d+):(%d+)$')
  dms, dus = tonumber(dms), tonumber(dus)
  if dms == 0 and dus == 0 then
    return ms
  end
  local r = sub + dus
  if r == 0 then
    return ms + dms
  elseif r <= 1000 then
    return ms + dms + 1
  end
  return ms + dms + 2
end

-- head returns the smallest score of a sorted set, or nil.
local function head(key)
  local h = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
  if h[2] then
    return tonumber(h[2])
  end
  return nil
end

-- A dead record (the value in the dead-letter hash) is
--   <attempt>,<dueMs>,<reasonLen>,<errLen>:<reason><err><envelope>
local function dead_record(attempt, due, reason, err, payload)
  return fmt(attempt) .. ',' .. fmt(due) .. ',' .. #reason .. ',' .. #err .. ':' .. reason .. err .. payload
end

local function parse_dead(rec)
  local s, e, a, due, rl, el = string.find(rec, '^(%d+),(%-?%d+),(%d+),(%d+):')
  if not s then
    return nil
  end
  rl = tonumber(rl)
  el = tonumber(el)
  return {
    attempt = tonumber(a),
    due = tonumber(due),
    reason = string.sub(rec, e + 1, e + rl),
    err = string.sub(rec, e + rl + 1, e + rl + el),
    payload = string.sub(rec, e + rl + el + 1),
  }
end

-- many runs a multi-read (HMGET, ZMSCORE) over fields in chunks Lua's
-- stack can take, and returns the replies in order.
local function many(cmd, key, fields)
  local n = #fields
  if n <= 1000 then
    if n == 0 then
      return {}
    end
    -- one call: its reply is the answer, no copy
    return redis.call(cmd, key, unpack(fields))
  end
  local out = {}
  for s = 1, n, 1000 do
    local r = redis.call(cmd, key, unpack(fields, s, math.min(s + 999, n)))
    for k = 1, #r do
      out[s + k - 1] = r[k]
    end
  end
  return out
end

-- batched runs a variadic command (cmd key a1 a2 ...) over args in chunks,
-- so that one call serves many timers without passing Lua's stack limit.
local function batched(cmd, key, args)
  local n = #args
  local step = 1000
  for i = 1, n, step do
    redis.call(cmd, key, unpack(args, i, math.min(i + step - 1, n)))
  end
end

-- outcomes reads the settle scripts' ARGV from ARGV[start] on: per outcome a
-- kind (0 ack, 1 retry, 2 snooze, 3 dead), an id and a token, and for every
-- kind but ack three more values (delay ms, reason, error text). It returns
-- the count, then the ids, kinds and tokens, and the ARGV index of each
-- outcome's kind (its extra values follow at +3, +4, +5).
local function outcomes(start)
  local q, kinds, toks, pos = {}, {}, {}, {}
  local n = 0
  local i = start
  local nargs = #ARGV
  while i <= nargs do
    n = n + 1
    local kind = ARGV[i]
    kinds[n] = kind
    q[n] = ARGV[i + 1]
    toks[n] = ARGV[i + 2]
    pos[n] = i
    if kind == '0' then
      i = i + 3
    else
      i = i + 6
    end
  end
  return n, q, kinds, toks, pos
end
