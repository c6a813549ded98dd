-- count.lua: count a topic's timers by state.
-- KEYS[1] due zset, KEYS[2] lease hash, KEYS[3] dead zset
-- Returns {all live timers, live leases, dead letters}. A lease is live
-- while its due score (the lease deadline) is in the future; an expired
-- lease not yet reclaimed counts as scheduled only.
return {count_topic(clock(), KEYS[1], KEYS[2], KEYS[3])}
