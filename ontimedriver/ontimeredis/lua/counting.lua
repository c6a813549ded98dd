-- counting.lua: the count helper of count.lua and count_topics.lua (not a
-- script itself).

-- count_topic returns all live timers, live leases and dead letters of one
-- topic at now (ms). Most topics of a store with many hold no lease and no
-- dead letter: one EXISTS of both keys then spares the reads of the lease
-- hash and the dead zset, and the topic costs two commands (a command a
-- script calls costs Redis about as much as the reading it does here). A
-- lease is live while its due score (the lease deadline) is after now.
local function count_topic(now, due, lease, dead)
  local call = redis.call
  local leased, dl = 0, 0
  if call('EXISTS', lease, dead) > 0 then
    for _, sc in ipairs(many('ZMSCORE', due, call('HKEYS', lease))) do
      if sc and tonumber(sc) > now then
        leased = leased + 1
      end
    end
    dl = call('ZCARD', dead)
  end
  return call('ZCARD', due), leased, dl
end
