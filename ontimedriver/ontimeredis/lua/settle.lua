-- settle.lua: apply outcomes of handled timers, each fenced by its token.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] dead zset,
-- KEYS[5] dead hash, KEYS[6] the topic index (one Redis only; absent on a
-- Redis Cluster)
-- ARGV[1] wake channel, ARGV[2] topic
-- then per outcome: kind (0 ack, 1 retry, 2 snooze, 3 dead), id, token
-- followed by ",", and for every kind but ack three more values: delay as
-- "<ms>:<us>" (see due_after), reason, error text
-- Returns one integer per outcome: 1 applied, 0 lease lost; then, when an
-- outcome was applied, the clock (us; 0 on one Redis) and the topic's new head (ms, or ""
-- when it holds no timer), to which its index entry is set (KEYS[6]; on a
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
  if argv[i] == '0' then
    i = i + 3
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
for j = 1, n do
  local id, p, l = q[j], pos[j], leases[j]
  local tok = argv[p + 2]
  local ok = l and #tok > 1 and not done[id] and sfind(l, tok, 1, true) == 1
  if not ok then
    out[j] = 0
  elseif argv[p] == '0' then
    out[j] = 1
    done[id] = true
    nd = nd + 1
    del[nd] = id
  else
    local kind = argv[p]
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
        dzadd[ndd + 1] = now
        dzadd[ndd + 2] = id
        dhset[ndd + 1] = id
        dhset[ndd + 2] = dead_record(attempt, r.due, argv[p + 4], argv[p + 5], r.payload)
        ndd = ndd + 2
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
  local h = idx_exact(KEYS[6], ARGV[2], KEYS[1])
  -- the clock versions the driver's hint (a Cluster only)
  if KEYS[6] then
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
