// Package ontimebolt provides the embedded store for ontime: timers kept in
// one bbolt file, for a single process that needs nothing installed.
//
//	d, err := ontimebolt.Open("/var/lib/ontime/timers.db", nil)
//	if err != nil {
//		return err
//	}
//	defer d.Close()
//	client, err := ontime.NewClient(d, nil)
//
// [Driver] implements [ontimedriver.Driver]; see that package for the model
// (scheduled, leased and dead timers, lease tokens, fencing).
//
// # Durability
//
// A write call (Schedule, Claim, Settle, Extend, Cancel, ReplayDead,
// ReplayAllDead, PurgeDead, PurgeAllDead; ReplayDead and PurgeDead with no
// ids write nothing) returns only after its transaction is committed and
// fsynced: a Schedule (a publish) that returned without error is on disk,
// and survives a crash of the process or of the machine, on storage that
// honours fsync.
// A call that returned an error changed nothing, with one exception: when
// the commit itself fails (an I/O error while writing or fsyncing the file;
// the error says "commit" and is logged), whether that transaction reached
// the disk is unknown, as with a Redis connection lost in mid-call.
//
// Open also fsyncs the directory that holds the file (on unix; elsewhere it
// is a no-op), so that the file's name survives a power loss, not only its
// contents. It does so at every Open, not only the one that creates the
// file, since that one may have died before it got there. Open creates no
// directories: a caller that creates the file's directory just before must
// fsync that directory's parent itself.
//
// Write calls are group committed: one writer goroutine takes a call, then
// every call already waiting for it (up to [Options].MaxBatch), and runs
// them in one transaction with one commit and one fsync. There is no linger:
// a lone caller is committed at once and pays one fsync. A caller that
// arrives while a commit is under way waits for it, then shares the next
// commit with every caller that arrived meanwhile, so its latency is about
// two commits at most (more only when over MaxBatch callers are waiting). Throughput therefore grows with the number of
// concurrent callers instead of being one fsync per call; a single caller
// that publishes one timer per call is bounded by the disk's fsync rate
// (pass many timers to one Schedule instead). Each call is still all or
// nothing: a call that fails is taken out of the batch and the others are
// redone without it.
//
// Reads (Get, List, Count, Topics, ListDead) use read transactions and run
// in parallel with each other and with the writer. They see only committed
// (and so fsynced) writes.
//
// # Leases and restarts
//
// Only one process has the file open at a time, and leases are held by
// that process's workers, so leases found in the file when it is opened
// belong to a process that is gone: Open drops them (with one log line),
// and their timers are due again at once, keeping the attempt their claim
// counted. A crash therefore delays nothing by a lease, and a message that
// crashes the process moves towards MaxAttempts with each crash.
//
// Claims wait for their commit's fsync, which is long next to a quick
// handler, so the Driver reports [Driver.SlowClaims] and ontime's workers
// claim ahead of their free handler slots (TopicOptions.ClaimAhead): the
// next claim shares a commit with the current batch's acks and with
// concurrent publishes.
//
// # Time
//
// The store's clock is the process clock (time.Now). Instants are kept in
// microseconds; due times round up and "now" rounds down, so a timer is
// never claimable early.
//
// # One process
//
// The file is locked while a Driver has it open. Open waits up to
// [Options].LockTimeout for the lock and then fails with [ErrLocked] naming
// the file. Subscribe notifications are in-process, which is all a store
// that only one process can open needs.
//
// # Topic index
//
// [Driver] implements [ontimedriver.TopicIndex], so one worker loop can
// serve thousands of topics. Since one process owns the file, the index is
// kept in memory: Open builds it from the first q key of every topic that
// has timers (no timer record is read), and every write batch ends by reading
// the head of each topic it wrote; the index takes those once the commit is
// fsynced and before any caller is answered, so it never shows a write that
// was rolled back, and after a failed commit the heads are read again. The
// indexed instant is therefore the topic's exact next claimable instant (a
// due time, or a lease deadline while leased), not merely a lower bound; a
// topic without timers is not in it. [Driver.DueTopics] uses the clock and
// rounding Claim uses, so a topic it reports is claimable.
//
// The index is a binary heap ordered by (instant, topic), with a map from
// topic to entry; an update costs O(log topics). A query walks the heap in
// order without changing it, so DueTopics with pattern "*" looks at one
// entry when nothing is due, whatever the number of topics, and at about
// as many as it returns otherwise. With another pattern it passes over the
// entries that do not match, in time order, and gives up after 1000 of
// them (or after 1000 due ones beyond the limit while it looks for Next):
// Next is then zero and the caller polls.
//
// [Driver.SubscribeTopics] wakes whenever a Subscribe listener of a
// matching topic would be woken. Its channel buffers one wake-up; one that
// finds it full is merged with the buffered one (earlier due time kept;
// two different topics become the empty topic, "look again").
//
// # Damage
//
// Open checks the file header (bbolt's meta pages) and size before bbolt
// maps it, so a truncated file or one that is not a store fails with
// [ErrCorrupt] instead of crashing the process. Every timer and dead-letter
// record carries a CRC-32C; a damaged one is reported (Get, List) or moved to
// the dead letters with [ReasonCorrupt] (Claim). A damaged bbolt page makes
// the call that reads it fail with ErrCorrupt: page faults and bbolt panics
// are recovered. [Options].CheckOnOpen verifies the whole file at open.
//
// # Layout
//
// Every bucket is store-wide and a topic is a key prefix, not a bucket, so
// a topic costs what it holds: a topic without timers or dead letters has
// nothing in the file and costs nothing at Open, and one with a single
// timer (a 100-byte body) takes about 460 bytes of the file. Open reads no
// per-topic structure: it reads the head of each topic that holds timers
// (about one page per 40 such topics) and nothing of the others.
//
//	m  topic → counts of timers and dead letters (only topics that hold some)
//	t  id ‖ topic → timer record: due, attempt, lease token and deadline, last error, payload
//	q  topic ‖ claimable instant ‖ id → ""   (due time, or lease deadline while leased)
//	u, f  as t and q, for timers claimable later than the next minutes
//	l  topic ‖ lease deadline ‖ id → ""      (leased timers only)
//	x  topic ‖ id → dead record: due, died at, attempt, reason, error, payload
//	y  topic ‖ died at ‖ id → ""
//	r  id ‖ topic → schedule entry of a recurring timer (created with the first; see recurring.go)
//
// The topic in a key is its length, then its bytes. Instants in keys are 8
// bytes big-endian, so byte order is time order. The claim index (q and f)
// serves Claim (walk the topic's keys from the first while due), Next (the
// topic's first key) and List (its order is the claim order). Lease tokens
// come from the t bucket's sequence, so none is ever handed out twice.
//
// A store with many timers keeps its speed: a commit's cost is the pages
// it writes, and the timers that commits write (published, claimed,
// settled) are the ones due now. So the timers are split by the instant
// they become claimable: those claimable within the next one to two
// minutes have their records in t and their index entries in q, the
// others in u and f, and a background promoter moves timers from u and f
// to t and q as they come near (it looks only at the topics whose next
// timer is that near, and writes nothing when there are none). A timer's
// key starts with the id, and the library's ids are time-ordered
// (UUIDv7), so the records a commit writes sit together in a few pages
// whatever their topics. With 30,000 timers due next year pending in a
// hundred topics, publishing, claiming and acking timers due now in eight
// of them writes as many pages per commit as on an empty store
// (TestLoadedStoreCommitPages; the first layout wrote 2.8 times its empty
// store's pages there, this one without the split 3.5 times).
// BenchmarkLoaded measures the time with a million. Reads look in both halves, so where a timer
// is never changes what they see.
//
// A file of the first layout ("ontimebolt/1", one bucket per topic, kept
// forever) is migrated in place by Open, in transactions of 20,000 keys; a
// crash in the middle is resumed by the next Open, and a version of ontime
// from before the migration refuses a file being migrated or migrated. The
// migration frees the old layout's pages for reuse without shrinking the
// file: later writes reuse them.
//
// # Space
//
// What the file takes: a timer with a 100-byte body (the library's
// envelope around it, 174 bytes, and a UUIDv7 id) takes about 380 bytes
// of the file (1,000,000 such timers over 100 topics: a 392 MB file,
// 382 MB of it in use; about 350 bytes once Compact packed it), and a topic
// that holds one timer about 460 bytes more than nothing (its name in
// three keys and its counts). A dead letter takes about as much as a
// timer.
//
// Deleting timers (acks, cancels, purges) frees their pages, and later
// writes reuse them: the file never shrinks by itself, and it does not
// grow while the store holds fewer timers than it once did. The free
// space does not slow writes down: commits never write bbolt's list of
// free pages (it is written at Close and after a second without writes;
// see [Options].NoFreelistSync), so publishing into a file that has just
// lost half of a million timers runs about as fast as into a fresh one
// (BenchmarkPublishAfterCancel; TestPublishAfterMassCancel: with the list
// written by every commit, a publish commit wrote 3.4 times the bytes).
//
// [Driver.Space] reports the file's size and its free part, and Open logs
// a hint when more than half of a file is free (and more than 64 MB).
// [Compact] (`ontime compact` for the server's store) rewrites the file
// with only what it holds, while the store is closed: compact when the
// disk space is needed, after the store held many more timers than it
// does now, and not otherwise (the free space is reused anyway, and a
// packed file's first writes split its pages). It needs free disk for a
// copy of what the store holds, and a crash in the middle loses nothing.
//
// # Benchmarks
//
// The shared driver benchmarks (package drivertest: publish one timer per
// call, 100 per call, from concurrent callers (group commit at work), and
// claim+ack) run on this store and on Redis in one command, for a
// side-by-side comparison on the same machine:
//
//	go test -run '^$' -bench Driver ./ontimedriver/ontimebolt/ ./ontimedriver/ontimeredis/
//
// The store at scale has benchmarks of its own (BENCHMARKS.md, "The
// embedded store at scale", has a run): BenchmarkTopicsOpen (20,000 and
// 100,000 one-timer topics: load, bytes per timer, cold and warm Open
// before and after cancelling), BenchmarkCancelBatch, BenchmarkLoaded
// (HandleTopics end to end and lateness with a million timers pending
// against an empty store), BenchmarkPublishAfterCancel and
// BenchmarkCompact.
package ontimebolt
