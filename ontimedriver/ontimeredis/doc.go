// Package ontimeredis keeps ontime timers in Redis (single node, Sentinel
// or Cluster) through a go-redis v9 UniversalClient that the caller owns.
// It needs Redis 6.2 or later (the scripts use ZMSCORE); it is tested on
// 7.0.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	d, err := ontimeredis.New(rdb, nil) // native layout, prefix "ontime:"
//	client, err := ontime.NewClient(d, nil)
//
// # Native layout
//
// Every key of a topic shares the hash tag {topic}, so each script runs in
// one cluster slot. With prefix P and topic T:
//
//	P{T}:due    sorted set  id → the instant the timer becomes claimable, in
//	                        Unix milliseconds: its due time, or its lease
//	                        deadline while leased
//	P{T}:msg    hash        id → record: "<attempt>,<due ms>,<len>:" + last
//	                        error text + envelope; written by schedule,
//	                        retry, snooze and replay, never by a claim
//	P{T}:lease  hash        id → "<token>,<attempt>", only while leased
//	P{T}:seq    string      lease token counter
//	P{T}:dead   sorted set  id → when it died (ms)
//	P{T}:dmsg   hash        id → "<attempt>,<due ms>,<len>,<len>:" + reason
//	                        + error text + envelope
//	P{T}:wake   channel     PUBLISHed with the new head's due time
//	Ptopics     set         the topics ever written (Topics filters out the
//	                        empty ones)
//
// The per-timer metadata lives in the record's short text header instead of
// a second hash, so a waiting timer costs one sorted-set entry and one hash
// field, as in the compatible layout, plus about 20 bytes; a leased timer
// has a small lease entry besides. A claim writes only that entry and the
// due score (never the envelope), and an ack reads only the lease entries,
// which keeps Redis's work per timer small.
//
// Time comes from the Redis server (TIME inside the scripts), never from
// worker clocks, so clock skew between hosts cannot make a timer fire early
// or hand one lease to two workers. Due times are whole milliseconds,
// rounded up.
//
// Every operation is one Lua script call (lua/*.lua, embedded, each with
// its KEYS/ARGV header). Scripts run by SHA; when Redis does not know a
// script (after a restart, a failover or SCRIPT FLUSH) the driver loads it
// and runs it again; Ping loads them all. Claim takes up to N due timers
// oldest first, gives each a fresh token, raises its attempt counter and
// returns the topic's next claimable instant in the same reply. Settle,
// Extend and Cancel are fenced by the token: a worker whose lease was lost,
// or whose timer was re-published meanwhile (a handler re-arming its own
// id), changes nothing.
//
// Wake-ups: a schedule, retry, snooze or replay that makes a timer earlier
// than the topic's head PUBLISHes on the topic's channel; each Driver keeps
// one pub/sub connection for all its subscriptions. Subscribe returns once
// Redis has confirmed the subscription. After the connection drops every
// subscriber gets a wake-up (and go-redis subscribes again), since
// notifications may have been missed.
//
// # Compatible layout
//
// Options{Layout: Compatible} reads and writes the keys, scores and
// envelopes of faststream-redis-timers (Python) byte for byte:
//
//	timers_timeline:<topic>  sorted set  id → float Unix seconds
//	timers_payloads:<topic>  hash        id → BinaryMessageFormatV1 envelope
//
// A Python service and an ontime worker can share a topic in both
// directions. What it cannot keep, because Python would not understand it:
// attempt counters (every delivery reports attempt 1, so the retry policy
// always uses its first delay and MaxAttempts never triggers), the last
// error, the original due time of a leased timer (a claim reports the
// instant the timer became claimable), a leased state (Get and Count show
// leased timers as scheduled) and, unless CompatDeadLetters is set, dead
// letters (a dead-lettered timer is deleted and logged). Python publishers
// do not send wake-ups, so a Go worker notices their timers at its next
// claim: the fallback PollInterval bounds that lateness; Go publishers do
// wake Go workers.
//
// Fencing without extra keys: a lease deadline written by ontime is a whole
// millisecond plus a tag of 1–999 microseconds, and the tag is the lease
// token (with the pre-claim due time, for dead letters). Due times written
// by ontime are whole milliseconds and never carry a tag. So a Go ack after
// a Go re-publish, or after another Go worker re-claimed the timer, is
// always refused; after a Python re-publish or a Python claim (arbitrary
// microseconds) it is refused except with probability 1/1000. Python's own
// acks stay unconditional, as they are in Python.
//
// Time in the compatible layout is also the Redis server's, at millisecond
// resolution: a Python score of 10.0005 s is due from 10.000 s on (Python
// itself compares against each worker's wall clock).
//
// The compatible layout's two keys per topic carry no hash tag, so it
// cannot run on Redis Cluster (neither can the Python library); New
// refuses a *redis.ClusterClient for it.
//
// # Envelope
//
// Both layouts store the same BinaryMessageFormatV1 envelope (package
// envelope). ontime writes header lengths in bytes; the Python writer puts
// code-point counts there, which differ only for non-ASCII header values.
package ontimeredis
