-- page.lua: one page of a sorted set in (score, member) order, with values.
-- KEYS[1] sorted set, KEYS[2] hash of values, KEYS[3] (optional) lease hash
-- ARGV[1] cursor score ("" = first page), ARGV[2] cursor member,
-- ARGV[3] before: only scores < before ("" = no bound), ARGV[4] limit
-- Returns {now ms, then per item: member, score, 1 if the value exists
-- else 0, value or "", lease or ""}.
local z = KEYS[1]
local start = 0
local function less_eq(a, b)
  -- byte order, as Redis orders members (Lua compares with the locale)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a <= #b
end
if ARGV[1] ~= '' then
  local cid = ARGV[2]
  local cur = redis.call('ZSCORE', z, cid)
  if cur and tonumber(cur) == tonumber(ARGV[1]) then
    start = redis.call('ZRANK', z, cid) + 1
  else
    -- the cursor member moved or went: find the first (score, member)
    -- after the cursor by binary search among the equal scores.
    local lo = redis.call('ZCOUNT', z, '-inf', '(' .. ARGV[1])
    local hi = lo + redis.call('ZCOUNT', z, ARGV[1], ARGV[1])
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local m = redis.call('ZRANGE', z, mid, mid)[1]
      if less_eq(m, cid) then
        lo = mid + 1
      else
        hi = mid
      end
    end
    start = lo
  end
end
local limit = tonumber(ARGV[4])
local items = redis.call('ZRANGE', z, start, start + limit - 1, 'WITHSCORES')
local before = nil
if ARGV[3] ~= '' then
  before = tonumber(ARGV[3])
end
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
for i = 1, #items, 2 do
  if before and tonumber(items[i + 1]) >= before then
    break
  end
  local id = items[i]
  out[#out + 1] = id
  out[#out + 1] = items[i + 1]
  local v = redis.call('HGET', KEYS[2], id)
  if v then
    out[#out + 1] = 1
    out[#out + 1] = v
  else
    out[#out + 1] = 0
    out[#out + 1] = ''
  end
  if KEYS[3] then
    out[#out + 1] = redis.call('HGET', KEYS[3], id) or ''
  else
    out[#out + 1] = ''
  end
end
return out
