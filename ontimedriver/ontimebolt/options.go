package ontimebolt

import (
	"log/slog"
	"os"
	"time"
)

// Options configure Open. The zero value (or a nil *Options) is ready to use;
// every field states its default.
type Options struct {
	// LockTimeout is how long Open waits for another process (or another
	// Driver in this process) to release the file before it gives up with an
	// error wrapping ErrLocked. Default 1s. A negative value fails at once.
	LockTimeout time.Duration

	// FileMode is the permission of a file Open creates. Default 0600.
	FileMode os.FileMode

	// CheckOnOpen makes Open read the whole file before it returns: every
	// timer and dead letter is decoded and its checksum verified, the indexes
	// and counters are compared with the records, and every page of the
	// file is checked (page types, references in bounds, no page used twice,
	// key order, free list). It costs about 9 s per million timers; without
	// it Open checks the file header, the file size and the store's own
	// buckets, and a damaged record is reported by the call that reads it.
	// Default false.
	CheckOnOpen bool

	// NoFreelistSync: never write bbolt's free-page list, so that every
	// Open rebuilds it. By default (false) the list is written when the
	// store is closed and after a second without writes, never by the
	// commits of write calls: a commit that wrote it would write (and
	// sort) every free page's number, which after mass deletes is
	// hundreds of kilobytes per commit (see "Space" in the package
	// documentation). Open reads a written list in about a millisecond;
	// without one (NoFreelistSync, or a process that ended in the middle
	// of writing) it rebuilds the list by reading every page of the file,
	// after checking those pages as CheckOnOpen does (bbolt's rebuild
	// cannot survive a damaged page). Files written with either setting
	// open with either. Default false.
	NoFreelistSync bool

	// MaxBatch caps how many concurrent write calls (Schedule, Claim,
	// Settle, Extend, Cancel, ReplayDead, ReplayAllDead, PurgeDead,
	// PurgeAllDead) share one transaction
	// and one fsync. Default 128.
	MaxBatch int

	// Logger receives what the driver cannot return to a caller: damaged
	// records moved out of the way by Claim, failed commits. Default
	// slog.Default().
	Logger *slog.Logger

	// syncDir fsyncs the file's directory at Open; tests replace it (see
	// export_test.go). Default syncDir.
	syncDir func(dir string) error

	// migrateChunk is how many keys a migration transaction moves (default
	// migrateChunk); migrateHook, if set, is called before each migration
	// transaction with the number done so far, and an error from it stops
	// the migration there, as a crash would. Tests set them.
	migrateChunk int
	migrateHook  func(txs int) error

	// nearHorizon is how far ahead of the clock the promoter keeps the
	// claim index's near mark (promote.go). Default nearHorizon; tests
	// shorten it.
	nearHorizon time.Duration

	// freelistIdle is how long the writer waits without writes before it
	// writes the free-page list. Default defaultFreelistIdle; negative:
	// only at Close (tests that count pages set it).
	freelistIdle time.Duration

	// compactHook, if set, is called by Compact with "copy" before it
	// copies the store and "rename" before it renames the copy (the
	// tests' crash points).
	compactHook func(stage string)

	// compactHint is the free space from which Open logs that the file
	// can be compacted (when it is also more than half the file). Default
	// defaultCompactHint; tests lower it.
	compactHint int64
}

const (
	defaultLockTimeout = time.Second
	defaultFileMode    = 0o600
	defaultMaxBatch    = 128
)

// withDefaults returns a copy of o with every unset field filled in.
func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	switch {
	case out.LockTimeout == 0:
		out.LockTimeout = defaultLockTimeout
	case out.LockTimeout < 0:
		// bbolt waits forever on 0; the smallest positive timeout tries once.
		out.LockTimeout = time.Nanosecond
	}
	if out.FileMode == 0 {
		out.FileMode = defaultFileMode
	}
	if out.MaxBatch <= 0 {
		out.MaxBatch = defaultMaxBatch
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if out.syncDir == nil {
		out.syncDir = syncDir
	}
	if out.compactHint <= 0 {
		out.compactHint = defaultCompactHint
	}
	if out.nearHorizon <= 0 {
		out.nearHorizon = nearHorizon
	}
	switch {
	case out.NoFreelistSync, out.freelistIdle < 0:
		out.freelistIdle = 0
	case out.freelistIdle == 0:
		out.freelistIdle = defaultFreelistIdle
	}
	return out
}
