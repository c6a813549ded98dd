package ontimebolt_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// Group commit: concurrent write calls share a transaction and its fsync,
// and each call still returns only once its timer is committed.
//
// The writer is held inside a transaction while the callers start, so that
// every one of them is queued when it is released: without the hold, on a
// fast disk the writer can keep pace with callers that arrive one by one, and
// how many calls share a commit would depend on scheduling. What the test
// then checks does not: a driver that commits each call alone makes one
// commit per call, whatever the timing.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	const calls = 64
	for _, tc := range []struct {
		name     string
		maxBatch int
		atLeast  int64 // commits for the calls
		atMost   int64
	}{
		// Queued callers share commits: at most 8 commits for 64 calls (a
		// batch of 8 on average); one fsync per call would make 64.
		{name: "default", atLeast: 1, atMost: calls / 8},
		// MaxBatch caps a batch: never fewer than 64/8 commits.
		{name: "MaxBatch8", maxBatch: 8, atLeast: calls / 8, atMost: 2 * calls / 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, path := open(t, &ontimebolt.Options{MaxBatch: tc.maxBatch})
			if !ontimebolt.SyncsCommits(d) {
				t.Fatal("bbolt is set not to fsync commits")
			}

			// A lone caller is committed alone: one commit per call. (This
			// also shows that the counter counts.)
			before := ontimebolt.Commits(d)
			for i := range 5 {
				schedule(t, d, "q", ontimedriver.NewTimer{ID: fmt.Sprintf("lone-%d", i)})
			}
			if got := ontimebolt.Commits(d) - before; got != 5 {
				t.Fatalf("5 calls one after another made %d commits, want 5", got)
			}

			release := ontimebolt.HoldWriter(t, d)
			before = ontimebolt.Commits(d)
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() {
					id := fmt.Sprintf("t-%02d", i)
					res, err := d.Schedule(ctx, "q", []ontimedriver.NewTimer{{ID: id, Delay: time.Hour, Payload: []byte(id)}}, ontimedriver.Upsert)
					if err != nil || res[0].Err != nil {
						t.Errorf("Schedule %s: %v %v", id, err, res)
						return
					}
					// A read sees only committed transactions, and bbolt
					// publishes a commit after its fsync: the call did not
					// return before its commit.
					if got, err := d.Get(ctx, "q", id); err != nil || string(got.Payload) != id {
						t.Errorf("Get %s right after its Schedule returned: %+v, %v", id, got, err)
					}
				})
			}
			wait.For(t, 10*time.Second, func() bool { return ontimebolt.Waiting(d) == calls }, "%d calls waiting for the held commit", calls)
			release()
			wg.Wait()
			got := ontimebolt.Commits(d) - before - 1 // the held transaction's own
			if got < tc.atLeast || got > tc.atMost {
				t.Errorf("%d concurrent calls made %d commits, want %d to %d", calls, got, tc.atLeast, tc.atMost)
			}
			t.Logf("%d concurrent calls, %d commits", calls, got)

			// Every timer is in the file itself: a copy taken now, with the
			// driver still open (Close writes nothing that could make up for
			// a missed commit), holds them all.
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cp := filepath.Join(t.TempDir(), "copy.db")
			if err := os.WriteFile(cp, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			d2 := reopen(t, cp, &ontimebolt.Options{CheckOnOpen: true})
			for i := range calls {
				id := fmt.Sprintf("t-%02d", i)
				if got, err := d2.Get(ctx, "q", id); err != nil || string(got.Payload) != id {
					t.Errorf("%s in the file: %+v, %v", id, got, err)
				}
			}
			if c, err := d2.Count(ctx, "q"); err != nil || c.Scheduled != calls+5 {
				t.Errorf("Count in the file = %+v, %v; want %d scheduled", c, err, calls+5)
			}
		})
	}
}

// Open fsyncs the directory that holds the file (a new file's name would
// otherwise not survive a power loss), following a symlinked path to the
// file's own directory, and fails cleanly when it cannot.
func TestOpenSyncsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	var synced []string
	opts := &ontimebolt.Options{Logger: quiet}
	ontimebolt.SetSyncDir(opts, func(d string) error {
		synced = append(synced, d)
		return nil
	})
	d, err := ontimebolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Errorf("new file: synced %q, want [%s]", synced, dir)
	}

	// A symlink elsewhere: the directory synced is the file's own.
	linkDir := t.TempDir()
	link := filepath.Join(linkDir, "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	synced = nil
	d, err = ontimebolt.Open(link, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	if len(synced) != 1 || synced[0] != realDir {
		t.Errorf("symlink: synced %q, want [%s]", synced, realDir)
	}

	// A failed sync fails Open with an error naming the directory, and
	// leaves the file unlocked.
	ontimebolt.SetSyncDir(opts, func(string) error { return errors.New("disk on fire") })
	if d, err := ontimebolt.Open(path, opts); err == nil {
		_ = d.Close()
		t.Fatal("Open succeeded although the directory sync failed")
	} else if msg := err.Error(); !strings.Contains(msg, "disk on fire") || !strings.Contains(msg, dir) {
		t.Errorf("Open error %q names neither the cause nor the directory", msg)
	}
	reopen(t, path, &ontimebolt.Options{LockTimeout: -1})
}
