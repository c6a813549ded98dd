-- sync.lua: set the topic index entries of a batch of topics to their
-- exact heads, or remove them, atomically (SyncTopicIndex on one Redis,
-- where a script may touch keys of any slot).
-- KEYS[1] index zset, then one due zset per topic
-- ARGV the topics, in the order of their due zsets
-- Returns how many entries are set.
local n = 0
for i = 1, #ARGV do
  if idx_exact(KEYS[1], ARGV[i], KEYS[i + 1]) then
    n = n + 1
  end
end
return n
