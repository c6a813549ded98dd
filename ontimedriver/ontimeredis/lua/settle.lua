-- settle.lua: apply outcomes of handled timers, each fenced by its token.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] dead zset,
-- KEYS[5] dead hash, KEYS[6] schedule hash (recurring timers), KEYS[7] the
-- topic index (one Redis only; absent on a Redis Cluster)
-- ARGV[1] wake channel, ARGV[2] topic
-- then per outcome: kind (0 ack, 1 retry, 2 snooze, 3 dead, 4 ack and arm
-- the next tick, 5 dead and arm the next tick), id, token followed by ",",
-- and for every kind but ack three more values: delay as "<ms>:<us>" (see
-- due_after), reason, error text; kinds 4 and 5 three more: the next
-- tick's due ms, number and scheduled instant ms.
-- A recurring timer (an entry in the schedule hash: "<tick>,<tick ms>,
-- <paused 0|1>,<last tick>,<last outcome>,<spec>") settled with kind 4 or 5 is not
-- deleted: its record is rewritten for the next tick (attempt 0), its
-- score set to the next tick's due time (or to PAUSED when paused) and its
-- entry to the next tick; a dead tick is copied to the dead letters as
-- "<id>#<tick>". Kinds 4 and 5 on a plain timer are acks and deads; kinds
-- 0 and 3 on a recurring timer end its schedule.
-- Returns one integer per outcome: 1 applied, 0 lease lost; then, when an
-- outcome was applied, the clock (us; 0 on one Redis) and the topic's new head (ms, or ""
-- when it holds no timer), to which its index entry is set (KEYS[7]; on a
-- Cluster the driver does).
--
-- Acks are most of the traffic: they take three values and touch only the
-- small lease entries; the clock and the head are read only when an
-- outcome needs them.
local argv = ARGV
local nargs = #argv
-- the outcomes' ids, and the ARGV index of each one's kind (its id and
-- token follow at +1 and +2, the extra values of a non-ack at +3 to +5)
local q, pos = {}, {}
local n = 0
local i = 3 -- ARGV[1] wake channel, ARGV[2] topic
while i <= nargs do
  n = n + 1
  q[n] = argv[i + 1]
  pos[n] = i
  local kd = argv[i]
  if kd == '0' then
    i = i + 3
  elseif kd == '4' or kd == '5' then
    i = i + 9
  else
    i = i + 6
  end
end
-- the token check reads the small lease entries; records are read only
-- for the outcomes that rewrite them
local leases = many('HMGET', KEYS[3], q)
local out = {}
local done = {} -- ids settled in this call: a second outcome is lost
-- del: ids whose timer ends (ack, dead): lease, record and score go;
-- keep: ids rescheduled (retry, snooze): only the lease goes
local del, keep, hset, zadd, dzadd, dhset = {}, {}, {}, {}, {}, {}
local nd, nk, nh, ndd = 0, 0, 0, 0
local now, sub, earliest
-- the schedule hash, looked at only when an outcome may concern it
local has_sched
local function sched_entry(id)
  if has_sched == nil then
    has_sched = redis.call('EXISTS', KEYS[6]) == 1
  end
  if not has_sched then
    return nil
  end
  return redis.call('HGET', KEYS[6], id) or nil
end
local shset, nsh = {}, 0
for j = 1, n do
  local id, p, l = q[j], pos[j], leases[j]
  local tok = argv[p + 2]
  local ok = l and #tok > 1 and not done[id] and sfind(l, tok, 1, true) == 1
  local kind = argv[p]
  local se
  if ok and (kind == '4' or kind == '5') then
    se = sched_entry(id)
    if not se then
      kind = kind == '4' and '0' or '3'
    end
  end
  if not ok then
    out[j] = 0
  elseif kind == '0' then
    out[j] = 1
    done[id] = true
    nd = nd + 1
    del[nd] = id
  else
    local attempt = lease_attempt(l, #tok)
    local rec = redis.call('HGET', KEYS[2], id)
    local r = attempt and rec and parse(rec)
    if not r then
      out[j] = 0
    else
      out[j] = 1
      done[id] = true
      if not now then
        now, sub = clock()
      end
      if kind == '3' then
        nd = nd + 1
        del[nd] = id
        -- a recurring timer's tick dies under <id>#<tick>
        local did = id
        local e = sched_entry(id)
        if e then
          did = id .. '#' .. string.match(e, '^%d+')
        end
        dzadd[ndd + 1] = now
        dzadd[ndd + 2] = did
        dhset[ndd + 1] = did
        dhset[ndd + 2] = dead_record(attempt, r.due, argv[p + 4], argv[p + 5], r.payload)
        ndd = ndd + 2
      elseif kind == '4' or kind == '5' then
        local tick, paused, spec = string.match(se, '^(%d+),%-?%d+,(%d),%d+,%a*,(.*)$')
        local ndue = tonumber(argv[p + 6])
        local outcome = 'ack'
        if kind == '5' then
          outcome = 'dead'
          local did = id .. '#' .. (tick or '0')
          dzadd[ndd + 1] = now
          dzadd[ndd + 2] = did
          dhset[ndd + 1] = did
          dhset[ndd + 2] = dead_record(attempt, r.due, argv[p + 4], argv[p + 5], r.payload)
          ndd = ndd + 2
        end
        nk = nk + 1
        keep[nk] = id
        local score = ndue
        if paused == '1' then
          score = PAUSED
        end
        hset[nh + 1] = id
        hset[nh + 2] = record(0, ndue, '', r.payload)
        zadd[nh + 1] = fmt(score)
        zadd[nh + 2] = id
        nh = nh + 2
        shset[nsh + 1] = id
        shset[nsh + 2] = argv[p + 7] .. ',' .. argv[p + 8] .. ',' .. (paused or '0') .. ',' .. (tick or '0') .. ',' .. outcome .. ',' .. (spec or '')
        nsh = nsh + 2
        if score ~= PAUSED and (not earliest or score < earliest) then
          earliest = score
        end
      else
        nk = nk + 1
        keep[nk] = id
        local due = due_after(now, sub, argv[p + 3])
        local err = r.err
        if kind == '2' then
          if attempt > 0 then
            attempt = attempt - 1
          end
        else
          err = argv[p + 5]
        end
        hset[nh + 1] = id
        hset[nh + 2] = record(attempt, due, err, r.payload)
        zadd[nh + 1] = due
        zadd[nh + 2] = id
        nh = nh + 2
        if not earliest or due < earliest then
          earliest = due
        end
      end
    end
  end
end
-- the head before this call's writes: a wake-up is sent only when a retry
-- or snooze becomes the new head
local old
if earliest then
  old = head(KEYS[1])
end
if nd > 0 then
  batched('HDEL', KEYS[3], del)
  batched('HDEL', KEYS[2], del)
  batched('ZREM', KEYS[1], del)
  if has_sched ~= false and redis.call('EXISTS', KEYS[6]) == 1 then
    batched('HDEL', KEYS[6], del)
  end
end
if nsh > 0 then
  batched('HSET', KEYS[6], shset)
end
if nk > 0 then
  batched('HDEL', KEYS[3], keep)
end
if nh > 0 then
  batched('HSET', KEYS[2], hset)
  batched('ZADD', KEYS[1], zadd)
end
if ndd > 0 then
  batched('ZADD', KEYS[4], dzadd)
  batched('HSET', KEYS[5], dhset)
end
if earliest and (not old or earliest < old) then
  redis.call('PUBLISH', ARGV[1], fmt(earliest))
end
if nd + nk > 0 then -- an outcome was applied
  local h = idx_exact(KEYS[7], ARGV[2], KEYS[1])
  -- the clock versions the driver's hint (a Cluster only)
  if KEYS[7] then
    out[n + 1] = 0
  else
    if not now then
      now, sub = clock()
    end
    out[n + 1] = now * 1000 + sub
  end
  out[n + 2] = h and fmt(h) or ''
end
return out
