// Package ontimeredis keeps ontime timers in Redis (single node, Sentinel
// or Cluster) through a go-redis v9 UniversalClient that the caller owns.
// It needs Redis 6.2 or later (the scripts use ZMSCORE and ZADD LT); it is
// tested on 7.0.
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
//	P{T}:lease  hash        id → "<token>,<attempt>" (or, for the entry that
//	                        converts the hash, "<token>,<attempt>,<padding>"),
//	                        only while leased
//	P{T}:seq    string      lease token counter
//	P{T}:dead   sorted set  id → when it died (ms)
//	P{T}:dmsg   hash        id → "<attempt>,<due ms>,<len>,<len>:" + reason
//	                        + error text + envelope
//	P{T}:wake   channel     PUBLISHed with the new head's due time (a
//	                        shard channel, SPUBLISHed, on a Redis Cluster)
//	P{T}:sched  hash        id → "<tick>,<tick ms>,<paused>,<last tick>,
//	                        <last outcome>,<spec>": the schedule entry of
//	                        a recurring timer (see recurring.go)
//	P{T}:shards string      the topic's shard count, once it is sharded
//	                        (its timers are then in P{T#i.k}:..., see
//	                        Sharded topics)
//	Ptopics     set         the topics ever written (Topics filters out the
//	                        empty ones)
//	P{topics}:next  sorted set  the topic index: topic → the instant its
//	                        next timer becomes claimable (ms, as the head
//	                        of P{T}:due), or earlier; no entry when the
//	                        topic holds no timer (see Topic index)
//	P{topics}:ver   hash    topic → the Redis clock (µs) of the last hint
//	                        applied to its index entry (Redis Cluster only)
//	P{topics}:wake  shard channel  "<ms> <topic>" each time a topic's
//	                        index entry is added or made earlier (Redis
//	                        Cluster with sharded pub/sub only; see Wake-ups
//	                        on a Redis Cluster)
//
// The per-timer metadata lives in the record's short text header instead of
// a second hash, so a waiting timer costs one sorted-set entry and one hash
// field, as in the compatible layout, plus about 20 bytes; a leased timer
// has a lease entry besides. A claim writes only that entry and the due
// score (never the envelope), and an ack reads only the lease entries,
// which keeps Redis's work per timer small.
//
// The padding (a comma and 64 dots) makes a lease entry longer than
// Redis's hash-max-listpack-value (64 bytes by default), so the lease hash
// is a hash table from the first claim on. In the compact listpack
// encoding, which Redis keeps for up to hash-max-listpack-entries (512)
// short entries, every lookup scans the whole list: with 100 leases in
// flight a claim plus its ack cost about 40% more Redis CPU, with 250
// about twice as much. Redis never converts a hash table back to a
// listpack, so a claim pads only the first entry it writes into a lease
// hash that is not a hash table (OBJECT ENCODING: absent, or loaded as a
// listpack from a snapshot); every other entry is "<token>,<attempt>",
// which keeps the entries short to write, store and read. Entries are read
// the same way with or without the padding (earlier versions of ontime
// padded every entry, and before that none).

// Time comes from the Redis server (TIME inside the scripts), never from
// worker clocks, so clock skew between hosts cannot make a timer fire early
// or hand one lease to two workers. Due times are whole milliseconds,
// rounded up, and a delay is added to the store's clock read at its full
// resolution (TIME's microseconds), so a timer published with In(d) is never
// claimed before TIME has advanced by d: due = the first whole millisecond
// at or after TIME + d (a timer due now, with no delay, is due at TIME's
// millisecond and claimable at once; a claim runs after the publish). A
// claim takes the timers whose due millisecond TIME has reached.
//
// # Timeouts
//
// Every call ends by its context's deadline, whatever the client's options:
// go-redis itself honours a context's deadline only with
// ContextTimeoutEnabled, and otherwise waits for its ReadTimeout (and its
// retries). With a client that does not honour it (the plain
// redis.NewClient(&redis.Options{Addr: ...}) above, or a client type the
// driver does not know) the driver runs each call that has a deadline on a
// goroutine of its own and returns the context's error when the deadline
// passes; the command itself keeps its connection until go-redis's own
// timeouts end it, and its reply is dropped. Like any timed-out call, it may
// or may not have been applied. With ContextTimeoutEnabled the call runs on
// the caller's goroutine and go-redis ends it. ontime's workers bound every
// store call (see docs/guarantees.md), so they need neither option.
//
// Every operation is one Lua script call (lua/*.lua, embedded, each with
// its KEYS/ARGV header). Scripts run by SHA (EVALSHA) on the node that
// holds the topic; when that node does not know a script (its first use
// there, a restart, a failover, SCRIPT FLUSH: NOSCRIPT, and the script did
// not run) the driver sends it whole once (EVAL, routed like EVALSHA), which
// runs it and leaves it in that node's cache. No other node is asked to load
// anything: on a Redis Cluster an unreachable replica, or a master that
// holds other topics, stops nothing (TestClusterReplicaDown). Scripts are
// never sent inside a pipeline. Claim takes up to N due timers
// oldest first, gives each a fresh token, raises its attempt counter and
// returns the topic's next claimable instant in the same reply. Settle,
// Extend and Cancel are fenced by the token: a worker whose lease was lost,
// or whose timer was re-published meanwhile (a handler re-arming its own
// id), changes nothing.
//
// Wake-ups: a schedule, retry, snooze or replay that makes a timer earlier
// than the topic's head PUBLISHes on the topic's channel; each Driver keeps
// one pub/sub connection for all its subscriptions (on one Redis; see below
// for a Cluster). Subscribe returns once Redis has confirmed the
// subscription. After the connection drops every subscriber gets a
// wake-up (and go-redis subscribes again), since notifications may have
// been missed.
//
// # Wake-ups on a Redis Cluster
//
// Classic PUBLISH on a Cluster is broadcast over the cluster bus to every
// node, so its cost grows with the cluster, and go-redis keeps a classic
// subscription on one node. On a *redis.ClusterClient the driver uses
// sharded pub/sub instead (Redis 7.0 or later; Options.ClassicPubSub
// turns it off for older servers): the scripts SPUBLISH a topic's wake-up
// on P{T}:wake, which is in the topic's own slot (for a sharded topic,
// each shard's channel is in the shard's slot), so only the master that
// holds the topic and its replicas carry it. Subscribe sends SSUBSCRIBE on
// one pub/sub connection per master, one command per slot (Redis refuses
// a shard-channel command across slots).
//
// Subscriptions follow their slots: when a master dies (its connection
// breaks), or Redis drops a subscription because its node lost the slot
// (an unasked sunsubscribe: a failover, a resharding), the driver starts
// its slot-map reloads (see Failover) and subscribes the connection's
// channels again on the master the map names, retrying every 50–200 ms
// while that fails, and checking every subscription against the map after
// each reload and every 2 s. Measured on a 3-master + 3-replica Cluster
// (TestShardedPubSubCluster, five runs on a busy 2-core machine): the
// subscriptions were on the promoted replica 33–407 ms after its
// promotion. While a subscription is down its
// subscribers are told to look again (a zero wake-up) when it is lost and
// when it is back, and poll in between.
//
// Pattern subscribers (SubscribeTopics, ontime.HandleTopics) have no
// sharded PSUBSCRIBE to use. Decision: on a Cluster the index hint the
// driver writes after each operation (see Topic index) also publishes the
// topic's wake-up, "<ms> <topic>", with SPUBLISH on one shard channel,
// P{topics}:wake, whenever the topic's index entry is added or made
// earlier; a pattern subscriber SSUBSCRIBEs to that one channel and the
// driver matches the topic against its pattern. So a pattern worker holds
// one subscription whatever the number of topics, hears of a new topic
// from its first timer (no subscription per topic to refresh as topics
// appear), and no wake-up crosses the cluster bus. The costs: every
// pattern subscriber receives the wake-ups of every topic (one short
// message per head that moved earlier) and filters them itself, and the
// master of the index's slot carries them all, on top of the index hints
// it takes already. The wake-up comes one round trip after the topic's
// script (it is written with the hint), and a lost hint loses its
// wake-up too (the worker's PollInterval bounds the lateness, as for any
// lost wake-up).
//
// One Redis (standalone, Sentinel) and the compatible layout (which
// cannot run on a Cluster) keep classic pub/sub; every driver that shares a
// Cluster must agree on Options.ClassicPubSub. A driver does not hear the
// wake-ups of one that uses the other kind (an ontime version before sharded
// pub/sub uses classic pub/sub): during a rolling upgrade timers are not
// lost, but can be up to PollInterval late between old and new processes.
//
// # Topic index
//
// The native layout keeps an index of topics by the instant their next
// timer becomes claimable (ontimedriver.TopicIndex), so that one worker
// loop serves thousands of topics, or a pattern of them, and an idle topic
// costs nothing per poll: DueTopics reads the index with one script call,
// SubscribeTopics PSUBSCRIBEs to the topics' wake channels on the driver's
// one pub/sub connection (on a Cluster, SSUBSCRIBEs to P{topics}:wake; see
// Wake-ups on a Redis Cluster).
//
// An entry is a lower bound: never later than the topic's next timer.
// Every claim and settle sets it to the topic's exact head, or removes it
// when the topic holds no timer (so emptied topics leave the index); a
// schedule, retry, snooze, FireNow or replay lowers it (ZADD LT) when the
// new timer may come first; a cancel that empties the topic removes it;
// other cancels, lease extensions and upserts that move the head later
// leave it low, which costs one claim that finds nothing.
//
// On one Redis (a *redis.Client: standalone, or Sentinel through
// redis.NewFailoverClient) the scripts write the index themselves,
// atomically with the timers (a script may touch keys of any slot there):
// the index is always right, and SyncTopicIndex is needed only after the
// index was deleted or timers were written by an older ontime.
//
// On a Redis Cluster (or any other client) the index is kept too, unless
// Options.NoClusterTopicIndex is set. It lives in another slot than the
// topics, so the scripts cannot write it: each returns what changed with
// its clock (TIME in µs) and the driver writes that as a hint after it,
// with a small script on the index's slot. A hint that can lower an entry
// (a schedule that makes the topic's head earlier or fills an empty topic,
// a retry, a snooze, FireNow, a replay, a recurring timer's next tick) is
// written before the call returns, one more round trip; a schedule behind
// the head writes none. Hints that can only raise an entry (claims,
// cancels, settles of acks and dead letters only) and the topic registry's
// additions go to a background writer that lets them gather for 5 ms and
// writes one hint per topic and one SADD per batch: the call does not wait,
// and a topic claimed and acked in a loop costs the index one small script
// per 5 ms. DueTopics, Topics and SyncTopicIndex first wait for what the
// process queued, so a process reads its own writes. Measured on a
// 3-master Cluster, the index costs no time or Redis CPU beyond this
// machine's noise on publishes, claims and acks (docs/BENCHMARKS.md, "The
// topic index on a Cluster"). Exact hints (claim,
// settle, cancel) apply only when newer than the last hint applied to the
// topic, lowering hints (schedule, FireNow, replay) always lower, so a hint
// that arrives late cannot undo a newer one. A crash between an operation
// and its hint, a failed hint write, or a failover to a replica whose clock
// is behind loses a hint: the cost is lateness for that topic until its
// next claim or the next SyncTopicIndex, never a lost timer.
// NeedsIndexRepair reports true there, and the library's pattern workers
// then call SyncTopicIndex every WorkerConfig.TopicIndexRepair. On a Cluster a
// wake-up is published by the topic's script before its hint is written:
// a woken worker claims the topic it names rather than wait for DueTopics
// to list it.
//
// The compatible layout keeps no index (the Python library writes its keys
// without one): TopicIndexed reports false, and DueTopics,
// SubscribeTopics and SyncTopicIndex return an error wrapping
// ontimedriver.ErrNoTopicIndex.
//
// # ACL rules
//
// A Redis user (ACL) for ontime needs, with the default prefix "ontime:"
// (replace it with yours; native layout):
//
//	ACL SETUSER ontime-worker on >secret -@all +ping +evalsha +eval +smembers +sadd +srem +sscan +exists +zcard +zrange +get +set +wait
//	    +hget +hmget +hset +hdel +hexists +hkeys +incrby +object|encoding +publish +time +unlink
//	    +zadd +zcount +zmscore +zrangebyscore +zrank +zrem +zscore
//	    +subscribe +unsubscribe +psubscribe +punsubscribe
//	    resetkeys ~ontime:* resetchannels &ontime:* &ontime:{*}:wake
//
// The commands are those the driver sends (PING, EVALSHA and EVAL, the
// topic registry's SMEMBERS/SADD/SREM/SSCAN, EXISTS, ZCARD, ZRANGE, and
// WAIT for Options.WaitReplicas) and those its scripts run (GET and SET
// read and record a sharded topic's shard count): Redis checks a script's
// commands against the user too. Every key starts with the prefix
// (~ontime:*: the topics' keys, the registry ontime:topics and the index
// ontime:{topics}:*). The scripts
// PUBLISH wake-ups on ontime:{topic}:wake, and workers SUBSCRIBE to them
// (&ontime:*). A pattern worker (ontime.HandleTopics with pattern P)
// PSUBSCRIBEs to ontime:{P}:wake, and Redis allows a PSUBSCRIBE only when
// the user's channel rules hold that pattern literally: grant each one,
// &ontime:{*}:wake for "*", &ontime:{tenant-*}:wake for "tenant-*" (or
// allchannels; the channels carry due times only).
//
// A publisher (a process that only publishes, cancels and reads timers)
// needs the same without the four subscribe commands and the literal
// patterns:
//
//	ACL SETUSER ontime-publisher on >secret -@all +ping +evalsha +eval +smembers +sadd +srem +sscan +exists +zcard +zrange +get +set +wait
//	    +hget +hmget +hset +hdel +hexists +hkeys +incrby +object|encoding +publish +time +unlink
//	    +zadd +zcount +zmscore +zrangebyscore +zrank +zrem +zscore
//	    resetkeys ~ontime:* resetchannels &ontime:*
//
// On a Redis Cluster go-redis also reads the slot map, and with sharded
// pub/sub (the default there) the scripts SPUBLISH and workers SSUBSCRIBE:
// add +cluster|slots +spublish to both users and +ssubscribe +sunsubscribe
// to the worker's (and +readonly for a client that reads from replicas).
// &ontime:* covers the shard channels, P{topics}:wake included, so a
// pattern worker needs no literal pattern there, and the four classic
// subscribe commands are not used (TestACLClusterRules). A user that lacks
// a rule gets Redis's refusal, with a pointer to this section: "NOPERM this
// user has no permissions to run the 'evalsha' command", "NOPERM ... to
// access one of the keys", or, for a command inside a script, Redis 7.0's
// "The user executing the script can't run this command or subcommand".
// (TestACLWorkerRules runs the conformance suite as a user with exactly
// these rules, over TLS; TestACLPublisherRules checks the publisher's and
// the refusals.)
//
// # Failover
//
// On Sentinel, build the client with redis.NewFailoverClient: it follows
// the primary the sentinels name. On a Redis Cluster with replicas the
// driver reloads the client's slot map itself when calls fail without a
// reply (a dead master), every 200 ms while they do, so that a dead
// master's topics are served by its promoted replica within about a
// second of the promotion, not at go-redis's next periodic reload (a
// minute); UnavailableTopics lists the topics whose calls fail meanwhile.
// Replication is asynchronous: what the old master acknowledged in its
// last moments can be lost (docs/guarantees.md, "A Redis failover").
// # Sharded topics
//
// One topic lives in one hash slot, so on a Redis Cluster it uses one
// master at most. Options.Shards spreads a hot topic over n key groups,
// the shards, each under its own hash tag: shard i of topic T is stored as
// the internal topic "T#i.k" (keys P{T#i.k}:due, ...; '#' is not allowed in
// topic names, so it never meets a user's topic), with k the smallest
// number that puts the tag's slot in the middle half of the i-th n-th of
// the 16384 slots. A Cluster whose masters own equal runs of slots (what
// redis-cli --cluster create makes) therefore holds each shard of a topic
// with as many shards as masters on its own master; other counts, or
// resharded slots, spread the shards over the slot space evenly but not
// one per master (CLUSTER KEYSLOT P{T#0.3}:due tells where one is).
//
// A timer's shard is fnv32a(id) mod n: Get, Cancel, FireNow, and the
// settling and lease extension of a claimed timer are one script on one
// shard, as for an unsharded topic. A batch Schedule (or Settle,
// CancelBatch) is split by shard and the parts run in parallel; it is
// atomic per shard, not as a whole. Claim reads the scores of up to max
// due entries of every shard (peek.lua, in parallel, read-only), picks the
// max oldest due ones across the shards (equal due times from the shards
// in turn, starting at the next shard on every call, so no shard waits
// behind another) and claims as many from each shard that holds some, in
// parallel: oldest first across the topic, one more parallel round trip
// than an unsharded claim, and an idle poll costs one O(log size) read per
// shard. One claim has one clock, the earliest the peeks read
// (ClaimResult.Now): no timer due after it is claimed, and every shard's
// lease deadline is that clock plus the lease. Subscribe listens to every shard's wake channel. List and ListDead read
// a page from every shard from the same cursor and merge them by (due,
// id), so paging stays in due order with cursors that work; Count,
// CountDue and CountTopics add the shards up. The topic registry and
// index hold the shards; Topics, DueTopics and SubscribeTopics answer with
// the topic.
//
// The shard count is stored with the topic, in P{T}:shards, by the first
// Schedule or Claim of a sharded driver, which refuses (ErrInvalid) a
// topic stored with another count, or one that holds timers or dead
// letters in its unsharded keys; an unsharded driver's Schedule of a
// sharded topic is refused too. Changing a topic's count is not
// supported while it holds timers: stop publishing to it, let the
// workers drain it (Count all zero), delete P{T}:shards, and start the
// drivers with the new count; or publish new timers to a new topic name.
// Every driver that touches a sharded topic (publishers, workers, the
// server) must have the same count for it.
//
// Recurring timers (ontimedriver.Recurring) are refused on a sharded
// topic: ScheduleRecurring, PauseRecurring and ResumeRecurring return an
// error wrapping ontimedriver.ErrUnsupported, and an unsharded driver's
// ScheduleRecurring on a sharded topic's keys is refused (ErrInvalid) as
// its Schedule is. A recurring timer's dead ticks are kept as "<id>#<tick>"
// in its own keys, that is in the shard of <id>, and a replayed dead tick
// becomes a one-shot timer that Get, Cancel and its settlement would look
// for in the shard of "<id>#<tick>", most often another one. Publish
// recurring timers to a topic the driver does not shard: they are few
// (one entry per schedule, one tick at a time), so they do not make a
// topic hot; the one-shot timers they trigger may go to a sharded topic.
//
// The cost: each shard's scripts handle smaller batches, so a timer costs
// more Redis CPU in all (1.6x in BenchmarkShardedTopic, 3 shards, claims'
// peeks included), which the masters share: 3 masters projected 1.9x one
// master's rate. See docs/BENCHMARKS.md.
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
// leased timers as scheduled, and FireNow makes a timer being delivered due
// again, so it is delivered twice) and, unless CompatDeadLetters is set, dead
// letters (a dead-lettered timer is deleted and logged). Python publishers
// do not send wake-ups, so a Go worker notices their timers at its next
// claim: the fallback PollInterval bounds that lateness. Go publishers
// (and Go retries and snoozes) wake Go workers on every call, with their
// timers' earliest due time, not only when it comes before the topic's
// head: the head may be a Python timer the workers do not know of, and a
// Go timer behind it would wait for their poll. When the head is already
// due (a Python timer nobody has claimed yet) the wake-up is for it, so
// that a Go publish also brings the waiting Python timers to a sleeping Go
// worker. A handler of type any (Handle[any]) gets a body as the Python
// reader's Any does: text/plain as a string, JSON as its value, another
// content type as []byte, none as JSON if it parses, else []byte.
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
// Time in the compatible layout is also the Redis server's, compared at its
// full resolution, the microsecond: a score stands for the nearest whole
// microsecond (a double holds no more: about 0.24 µs today), and a Go
// claim takes it once TIME has reached that microsecond, so a Python score
// of 10.0005 s is due at 10.000500 s, never before (Python itself compares
// against each worker's wall clock). Due times ontime writes are whole
// milliseconds, rounded up as in the native layout.
//
// The compatible layout's two keys per topic carry no hash tag, so it
// cannot run on Redis Cluster (neither can the Python library); New
// refuses a *redis.ClusterClient for it.
//
// # Envelope
//
// Both layouts store the same BinaryMessageFormatV1 envelope (package
// envelope). ontime writes header lengths in bytes; the Python writer puts
// code-point counts there, which differ only for non-ASCII header keys and
// values. ontime's decoder reads both (it falls back to code-point counts
// when the byte reading does not fit the envelope exactly; see package
// envelope), so a Python timer with a non-ASCII header, say a correlation id
// "trace-é", is delivered to a Go handler with the headers Python meant.
// The Python reader cannot read such an envelope and hands the whole of it
// over as a raw body.
//
// User headers: ontime writes them sorted by key (Publish takes them as a
// map, which has no order); the Python writer keeps its dict's insertion
// order. Both readers see the same headers either way; only a byte-for-byte
// comparison of two envelopes with two or more user headers tells them
// apart.
//
// The two readers also differ on damaged (or hand-made) envelopes that
// start with the magic. One whose data_start points past its end: the
// Python reader reads its headers and hands over an empty body (slicing
// past the end of a bytes value gives an empty one); ontime treats it as
// undecodable. One that reads consistently neither way: the Python reader
// delivers it as a raw body; ontime treats it as undecodable. ontime
// dead-letters an undecodable envelope (reason "undecodable"; the stored
// bytes are kept whole in the dead letter). In the compatible layout that dead letter is kept only
// with CompatDeadLetters; without it the timer is deleted and a warning
// logged, as for every dead letter there. Either way a handler is never
// given such bytes as its payload.
//
// # JSON bodies
//
// A body that is not a string, []byte, json.RawMessage or nil is encoded
// with encoding/json, compact and without HTML escaping, which gives the
// same bytes as the Python writer's compact JSON for structs (fields in
// declaration order, as a Python dict built in the same order) holding
// strings, integers and booleans, and for ASCII text. It does not always
// give the same bytes:
//
//   - Go escapes U+2028 and U+2029 in strings (\u2028, \u2029); Python
//     writes them raw.
//   - Go writes map keys sorted; Python keeps a dict's insertion order.
//   - Floating-point numbers are spelled differently: Go writes 1.0 as 1,
//     1e16 as 10000000000000000 and 1.5e-7 as 1.5e-7, Python 1.0, 1e+16 and
//     1.5e-07.
//
// The decoded values are the same either way; only a byte-for-byte
// comparison of payloads written by the two sides (a hash for
// de-duplication, a golden test) sees the difference. A json.RawMessage
// body is only compacted, so its bytes are kept otherwise (U+2028 stays
// raw).
package ontimeredis
