-- list_recurring.lua: one page of a topic's recurring timers, by id in
-- byte order, with what Get reads for each.
-- KEYS[1] schedule hash, KEYS[2] due zset, KEYS[3] msg hash, KEYS[4]
-- lease hash
-- ARGV[1] the last id of the previous page ("" = first page), ARGV[2]
-- limit
-- Returns {now ms, 1 if more ids follow the page else 0, then per id:
-- id, score or "", lease entry or "", record or "", schedule entry}.
-- Cost: one HKEYS of the schedule hash and a sort of the ids after the
-- cursor: it grows with the topic's recurring timers, not its plain ones.
local function less(a, b)
  -- byte order (Lua's < compares with the locale)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end
local after = ARGV[1]
local limit = tonumber(ARGV[2])
local ids = redis.call('HKEYS', KEYS[1])
local cand = {}
for i = 1, #ids do
  if after == '' or less(after, ids[i]) then
    cand[#cand + 1] = ids[i]
  end
end
table.sort(cand, less)
local more = 0
if #cand > limit then
  more = 1
end
local out = {now_ms(), more}
for i = 1, math.min(#cand, limit) do
  local id = cand[i]
  out[#out + 1] = id
  out[#out + 1] = redis.call('ZSCORE', KEYS[2], id) or ''
  out[#out + 1] = redis.call('HGET', KEYS[4], id) or ''
  out[#out + 1] = redis.call('HGET', KEYS[3], id) or ''
  out[#out + 1] = redis.call('HGET', KEYS[1], id) or ''
end
return out
