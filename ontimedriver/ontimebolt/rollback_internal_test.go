package ontimebolt

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime/ontimedriver"
)

// TestPanickedWriteOnDamagedFile: a write transaction that panics (as a
// fault on a damaged page does) is rolled back without bbolt's rebuild of
// its free list, which walks every page (the file holds no written list
// between commits) and, on a damaged page, panicked with bbolt's write
// lock held: every later write then waited forever. Here a page the
// writes do not touch is damaged in the file, a write panics, and the
// next write must still go through.
func TestPanickedWriteOnDamagedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	d, err := Open(path, &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	// Enough dead letters that the y bucket has pages of its own.
	var ts []ontimedriver.NewTimer
	for i := range 300 {
		ts = append(ts, ontimedriver.NewTimer{ID: fmt.Sprintf("d%03d", i), Payload: make([]byte, 100)})
	}
	if _, err := d.Schedule(ctx, "dead", ts, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	r, err := d.Claim(ctx, "dead", 300, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var ops []ontimedriver.Settlement
	for _, c := range r.Timers {
		ops = append(ops, ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: c.ID, Token: c.Token}, Kind: ontimedriver.Dead, Reason: "r"})
	}
	if _, err := d.Settle(ctx, "dead", ops); err != nil {
		t.Fatal(err)
	}
	var root uint64
	if err := d.db.View(func(tx *bbolt.Tx) error {
		root = uint64(tx.Bucket(bucketDeadIdx).Root())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if root == 0 {
		t.Fatal("the dead index is inline; the test needs it in pages of its own")
	}
	// Damage that page's type in the file (the map is shared, so the
	// open store sees it).
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0x7f, 0x7f}, int64(root)*int64(d.db.Info().PageSize)+8); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	err = d.update(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucketTopicMeta).Put([]byte("x"), encodeCounts(1, 0)); err != nil {
			return err
		}
		panic("a fault on a damaged page")
	})
	if err == nil {
		t.Fatal("a panicking write reported no error")
	}
	done := make(chan error, 1)
	go func() { done <- d.update(func(*bbolt.Tx) error { return nil }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the write after the panicked one: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write after a panicked one waits for bbolt's write lock")
	}
	if err := d.db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketTopicMeta).Get([]byte("x")) != nil {
			t.Error("the panicked write was not rolled back")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
