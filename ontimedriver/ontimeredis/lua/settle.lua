-- settle.lua: apply outcomes of handled timers, each fenced by its token.
-- KEYS[1] due zset, KEYS[2] msg hash, KEYS[3] lease hash, KEYS[4] dead zset,
-- KEYS[5] dead hash
-- ARGV[1] wake channel
-- then per outcome 6 values: id, token, kind (0 ack, 1 retry, 2 snooze,
-- 3 dead), delay ms, reason, error text
-- Returns one integer per outcome: 1 applied, 0 lease lost.
local now = now_ms()
local old = head(KEYS[1])
local out = {}
local earliest = nil
local q = {}
for i = 2, #ARGV, 6 do
  q[#q + 1] = ARGV[i]
end
-- the token check reads the small lease entries; records are read only
-- for the outcomes that rewrite them
local leases = many('HMGET', KEYS[3], q)
local done = {} -- ids settled in this call: a second outcome is lost
local del, unlease, hset, zadd, dzadd, dhset = {}, {}, {}, {}, {}, {}
local n = 0
for i = 2, #ARGV, 6 do
  n = n + 1
  local id, token, kind = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local ok, attempt = false, 0
  if not done[id] then
    ok, attempt = held(leases[n], token)
  end
  local r
  if ok and kind ~= '0' then
    local rec = redis.call('HGET', KEYS[2], id)
    r = rec and parse(rec)
    ok = r and true or false
  end
  if not ok then
    out[n] = 0
  else
    out[n] = 1
    done[id] = true
    unlease[#unlease + 1] = id
    if kind == '0' then
      del[#del + 1] = id
    elseif kind == '3' then
      del[#del + 1] = id
      dzadd[#dzadd + 1] = now
      dzadd[#dzadd + 1] = id
      dhset[#dhset + 1] = id
      dhset[#dhset + 1] = dead_record(attempt, r.due, ARGV[i + 4], ARGV[i + 5], r.payload)
    else
      local due = now + tonumber(ARGV[i + 3])
      local err = r.err
      if kind == '2' then
        if attempt > 0 then
          attempt = attempt - 1
        end
      else
        err = ARGV[i + 5]
      end
      hset[#hset + 1] = id
      hset[#hset + 1] = record(attempt, due, err, r.payload)
      zadd[#zadd + 1] = due
      zadd[#zadd + 1] = id
      if not earliest or due < earliest then
        earliest = due
      end
    end
  end
end
if #unlease > 0 then
  batched('HDEL', KEYS[3], unlease)
end
if #del > 0 then
  batched('HDEL', KEYS[2], del)
  batched('ZREM', KEYS[1], del)
end
if #hset > 0 then
  batched('HSET', KEYS[2], hset)
  batched('ZADD', KEYS[1], zadd)
end
if #dhset > 0 then
  batched('ZADD', KEYS[4], dzadd)
  batched('HSET', KEYS[5], dhset)
end
if earliest and (not old or earliest < old) then
  redis.call('PUBLISH', ARGV[1], fmt(earliest))
end
return out
