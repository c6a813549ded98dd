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
// PurgeDead) returns after its transaction is committed and fsynced. Write
// calls are group committed: one writer goroutine takes every call waiting
// for it and runs them in one transaction, so concurrent callers share one
// fsync. A lone caller pays one fsync and no added delay. Each call is still
// all or nothing: a call that fails is taken out of the batch and the others
// are redone without it.
//
// Reads (Get, List, Count, Topics, ListDead) use read transactions and run
// in parallel with each other and with the writer.
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
// One bucket per topic under a "topics" bucket, each holding:
//
//	t  id → timer record: due, attempt, lease token and deadline, last error, payload
//	q  claimable instant ‖ id → ""   (due time, or lease deadline while leased)
//	l  lease deadline ‖ id → ""       (leased timers only)
//	x  id → dead record: due, died at, attempt, reason, error, payload
//	y  died at ‖ id → ""
//	n, d  counts of timers and dead letters
//
// Instants in keys are 8 bytes big-endian, so byte order is time order. q
// serves Claim (walk from the start while due), Next (its first key) and List
// (its order is the claim order) in one index. Lease tokens come from the
// topic bucket's sequence, so none is ever handed out twice.
package ontimebolt
