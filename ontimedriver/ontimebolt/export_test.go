package ontimebolt

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// Hooks for the tests of package ontimebolt_test. They are not part of the
// API: this file is compiled only into the test binary.

// Commits returns how many write transactions d's writer has committed (one
// fsync each).
func Commits(d *Driver) int64 { return d.commits.Load() }

// Waiting returns how many write calls are waiting for d's writer to take
// them.
func Waiting(d *Driver) int64 { return d.waiting.Load() }

// SyncsCommits reports whether bbolt fsyncs d's commits and the growth of
// its file (NoSync and NoGrowSync both off).
func SyncsCommits(d *Driver) bool { return !d.db.NoSync && !d.db.NoGrowSync }

// HoldWriter makes d's writer run a transaction that blocks until release
// is called, so that write calls made meanwhile queue up. It returns once
// the writer is inside that transaction. release waits for the held
// transaction's commit; it is also called at cleanup.
func HoldWriter(t testing.TB, d *Driver) (release func()) {
	t.Helper()
	var (
		inside, freed       = make(chan struct{}), make(chan struct{})
		insideOnce, relOnce sync.Once
		done                = make(chan error, 1)
	)
	go func() {
		done <- d.write(context.Background(), "", func(*bbolt.Tx) error {
			insideOnce.Do(func() { close(inside) })
			<-freed
			return nil
		})
	}()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("HoldWriter: the write ended before it was held: %v", err)
	}
	release = func() {
		relOnce.Do(func() {
			close(freed)
			if err := <-done; err != nil {
				t.Errorf("HoldWriter: the held write failed: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// SetSyncDir makes Open call f instead of fsyncing the file's directory.
func SetSyncDir(o *Options, f func(dir string) error) { o.syncDir = f }

// SyncDir is syncDir, the directory fsync Open uses.
var SyncDir = syncDir

// TxStats returns bbolt's cumulative transaction statistics of d's file.
func TxStats(d *Driver) bbolt.TxStats { return d.db.Stats().TxStats }

// Indexed returns topic's instant in d's topic index.
func Indexed(d *Driver, topic string) (time.Time, bool) {
	us, ok := d.idx.get(topic)
	if !ok {
		return time.Time{}, false
	}
	return fromMicros(us), true
}

// IndexLen returns how many topics d's topic index holds.
func IndexLen(d *Driver) int {
	d.idx.mu.Lock()
	defer d.idx.mu.Unlock()
	return len(d.idx.heap)
}

// IndexVisited returns how many index entries d's DueTopics calls have
// looked at, in all.
func IndexVisited(d *Driver) int64 { return d.idx.visited.Load() }

// FileHead reads topic's first claimable instant from the file (the first
// key of its q bucket), as the index should have it.
func FileHead(t testing.TB, d *Driver, topic string) (time.Time, bool) {
	t.Helper()
	var (
		us int64
		ok bool
	)
	err := d.view(func(tx *bbolt.Tx) error {
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		us, ok = tb.head()
		return nil
	})
	if err != nil {
		t.Fatalf("FileHead(%q): %v", topic, err)
	}
	if !ok {
		return time.Time{}, false
	}
	return fromMicros(us), true
}

// DBStats returns bbolt's statistics of d's file.
func DBStats(d *Driver) bbolt.Stats { return d.db.Stats() }

// SetMigration makes Open migrate a format 1 file in transactions of chunk
// keys, calling hook before each (an error from it stops the migration).
func SetMigration(o *Options, chunk int, hook func(txs int) error) {
	o.migrateChunk, o.migrateHook = chunk, hook
}

// Format returns the format marker of d's file.
func Format(t testing.TB, d *Driver) string {
	t.Helper()
	var f string
	if err := d.view(func(tx *bbolt.Tx) error {
		f = string(tx.Bucket(bucketMeta).Get(keyFormat))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

// InUse returns the bytes of d's file in use: pages neither free nor
// waiting to be freed, times the page size.
func InUse(t testing.TB, d *Driver) int64 {
	t.Helper()
	var n int64
	if err := d.db.View(func(tx *bbolt.Tx) error {
		st := d.db.Stats()
		n = tx.Size() - int64(st.FreePageN+st.PendingPageN)*int64(d.db.Info().PageSize)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// SetNearHorizon sets how far ahead of the clock the promoter keeps the
// claim index's near mark.
func SetNearHorizon(o *Options, h time.Duration) { o.nearHorizon = h }

// ClaimIndexSplit counts topic's claim index entries in q (near) and f
// (far).
func ClaimIndexSplit(t testing.TB, d *Driver, topic string) (near, far int) {
	t.Helper()
	if err := d.view(func(tx *bbolt.Tx) error {
		tb, err := d.lookup(tx, topic)
		if err != nil {
			return err
		}
		c := tb.cursor(tb.queue)
		for k := c.first(); k != nil; k = c.next() {
			near++
		}
		c = tb.cursor(tb.future)
		for k := c.first(); k != nil; k = c.next() {
			far++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return near, far
}

// Promotions returns how many times d's promoter has run.
func Promotions(d *Driver) int64 { return d.promotions.Load() }

// SetFreelistIdle sets how long d's writer waits without writes before it
// writes the free-page list (negative: only at Close).
func SetFreelistIdle(o *Options, idle time.Duration) { o.freelistIdle = idle }

// SetCompactHook makes Compact call hook with "copy" before it copies the
// store and "rename" before it renames the copy over the store file.
func SetCompactHook(o *Options, hook func(stage string)) { o.compactHook = hook }

// Replaced reports whether the name path no longer leads to f.
func Replaced(path string, f *os.File) bool { return replaced(path, f) }

// SetCompactHint sets the free space from which Open logs that the file
// can be compacted.
func SetCompactHint(o *Options, n int64) { o.compactHint = n }
