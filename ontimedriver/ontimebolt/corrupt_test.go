package ontimebolt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// wantCorrupt checks that err wraps ErrCorrupt and names the file.
func wantCorrupt(t *testing.T, err error, path string) {
	t.Helper()
	if !errors.Is(err, ontimebolt.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v: want ErrCorrupt naming %s", err, path)
	}
}

// populated writes a store with timers in two topics, a lease and a dead
// letter, and returns its path (closed).
func populated(t *testing.T, n int, payload func(i int) []byte) string {
	t.Helper()
	return populatedWith(t, n, payload, &ontimebolt.Options{Logger: quiet})
}

func populatedWith(t *testing.T, n int, payload func(i int) []byte, opts *ontimebolt.Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	d, err := ontimebolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"alpha", "beta"} {
		var timers []ontimedriver.NewTimer
		for i := range n {
			timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprintf("%s-%04d", topic, i), Delay: time.Duration(i) * time.Millisecond, Payload: payload(i)})
		}
		schedule(t, d, topic, timers...)
	}
	r := claim(t, d, "alpha", 2, time.Hour)
	settle(t, d, "alpha", ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: r.Timers[0].ID, Token: r.Timers[0].Token}, Kind: ontimedriver.Dead, Reason: "test"})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// header reads bbolt's page size and high water mark (pages in use) from
// the first meta page.
func header(t *testing.T, path string) (pageSize, pages int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	return int64(le.Uint32(b[16+8:])), int64(le.Uint64(b[16+40:]))
}

func TestOpenRandomBytes(t *testing.T) {
	t.Parallel()
	for _, size := range []int{10, 4096, 64 << 10} {
		path := filepath.Join(t.TempDir(), "random.db")
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rand.IntN(256))
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
		wantCorrupt(t, err, path)
	}
}

func TestOpenForeignBoltFile(t *testing.T) {
	t.Parallel()
	path := populated(t, 1, func(int) []byte { return nil })
	// A bbolt file of someone else looks like this one with other buckets:
	// rename our marker bucket by flipping its name in the file.
	b, _ := os.ReadFile(path)
	i := bytes.Index(b, []byte("ontime"))
	for i >= 0 {
		b[i] = 'X'
		j := bytes.Index(b[i+1:], []byte("ontime"))
		if j < 0 {
			break
		}
		i += 1 + j
	}
	_ = os.WriteFile(path, b, 0o600)
	_, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	wantCorrupt(t, err, path)
}

func TestOpenTruncated(t *testing.T) {
	t.Parallel()
	src := populated(t, 500, func(int) []byte { return bytes.Repeat([]byte("p"), 300) })
	pageSize, pages := header(t, src)
	orig, _ := os.ReadFile(src)
	for _, size := range []int64{100, 2*pageSize - 1, 3 * pageSize, pages * pageSize / 2, (pages - 1) * pageSize} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "truncated.db")
			if err := os.WriteFile(path, orig[:size], 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
			wantCorrupt(t, err, path)
		})
	}
}

// A flipped byte in a timer's payload is caught by the record checksum: Get
// reports it naming the file, Claim moves the timer to the dead letters
// instead of handing it out or stalling the topic, and CheckOnOpen refuses
// the file.
func TestFlippedByteInRecord(t *testing.T) {
	t.Parallel()
	marker := []byte("MARKER-payload-of-timer-0007-MARKER")
	path := populated(t, 20, func(i int) []byte {
		if i == 7 {
			return marker
		}
		return []byte("ordinary")
	})
	b, _ := os.ReadFile(path)
	flipped := 0
	for i := bytes.Index(b, marker); i >= 0; {
		b[i+10] ^= 0x20 // every copy, the live one among them
		flipped++
		j := bytes.Index(b[i+1:], marker)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if flipped == 0 {
		t.Fatal("marker not found in the file")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	_, err := ontimebolt.Open(path, &ontimebolt.Options{CheckOnOpen: true, Logger: quiet})
	wantCorrupt(t, err, path)

	d := reopen(t, path, nil)
	_, err = d.Get(ctx, "beta", "beta-0007")
	wantCorrupt(t, err, path)
	_, err = d.List(ctx, "beta", ontimedriver.ListOptions{Limit: 1000})
	wantCorrupt(t, err, path)
	if _, err := d.Get(ctx, "beta", "beta-0006"); err != nil {
		t.Errorf("a sound neighbour: %v", err)
	}
	// Claim everything: 19 timers come out, the damaged one goes dead.
	var got int
	wait.For(t, 5*time.Second, func() bool {
		r := claim(t, d, "beta", 100, time.Hour)
		got += len(r.Timers)
		return got == 19
	}, "the 19 sound timers of beta to be claimed")
	page, _ := d.ListDead(ctx, "beta", ontimedriver.ListOptions{})
	if len(page.Dead) != 1 || page.Dead[0].ID != "beta-0007" || page.Dead[0].Reason != ontimebolt.ReasonCorrupt {
		t.Fatalf("dead letters = %+v", page.Dead)
	}
	// The same payload is damaged in topic alpha: Cancel removes a damaged
	// timer with its index entries.
	if err := d.Cancel(ctx, "alpha", "alpha-0007"); err != nil {
		t.Fatalf("Cancel damaged: %v", err)
	}
	// What is left is consistent again.
	_ = d.Close()
	reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
}

// Flip bytes all over the data pages of a small store, one at a time, and
// use the store: every failure must be an error (ErrCorrupt naming the file,
// or an ordinary not-found), never a crash. Byte offsets are spread evenly
// so the run is repeatable.
//
// Files written with NoFreelistSync are the dangerous kind: bbolt rebuilds
// their free list at open by a walk that panics out of reach of recover, so
// Open must check their pages first.
//
// A -race binary opens every file with CheckOnOpen: -race turns on checkptr,
// and checkptr stops the process (a fatal error, not a panic) when bbolt
// makes a slice from a damaged page's element count, so reading unchecked
// damage cannot be survived there; without -race the same read faults or
// panics inside the driver's recover and becomes ErrCorrupt. `make test`
// runs this test a second time without -race for that path.
func TestFlippedBytesAnywhere(t *testing.T) {
	t.Parallel()
	for _, noFreelist := range []bool{false, true} {
		t.Run(fmt.Sprint("NoFreelistSync=", noFreelist), func(t *testing.T) {
			t.Parallel()
			flipAnywhere(t, &ontimebolt.Options{NoFreelistSync: noFreelist, Logger: quiet})
		})
	}
}

func flipAnywhere(t *testing.T, opts *ontimebolt.Options) {
	src := populatedWith(t, 150, func(i int) []byte { return []byte(fmt.Sprint("payload ", i)) }, opts)
	pageSize, pages := header(t, src)
	orig, _ := os.ReadFile(src)
	end := min(pages*pageSize, int64(len(orig)))
	const trials = 150
	var openErrs, callErrs int
	for trial := range trials {
		off := 2*pageSize + int64(trial)*(end-2*pageSize)/trials + int64(trial%13)
		b := bytes.Clone(orig)
		b[off] ^= 0xff
		path := filepath.Join(t.TempDir(), fmt.Sprintf("flip-%d.db", off))
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, check := range []bool{true, false} {
			if raceBuild && !check {
				continue
			}
			d, err := ontimebolt.Open(path, &ontimebolt.Options{CheckOnOpen: check, NoFreelistSync: opts.NoFreelistSync, LockTimeout: -1, Logger: quiet})
			if err != nil {
				openErrs++
				wantCorrupt(t, err, path)
				continue
			}
			for _, call := range []func() error{
				func() error { _, err := d.Get(ctx, "alpha", "alpha-0005"); return err },
				func() error { _, err := d.List(ctx, "beta", ontimedriver.ListOptions{Limit: 1000}); return err },
				func() error { _, err := d.Count(ctx, "alpha"); return err },
				func() error { _, err := d.Topics(ctx); return err },
				func() error { _, err := d.ListDead(ctx, "alpha", ontimedriver.ListOptions{}); return err },
				func() error { _, err := d.Claim(ctx, "beta", 100, time.Hour); return err },
				func() error { return d.Cancel(ctx, "alpha", "alpha-0010") },
				func() error {
					_, err := d.Schedule(ctx, "alpha", []ontimedriver.NewTimer{{ID: "new"}}, ontimedriver.Upsert)
					return err
				},
			} {
				err := call()
				if err != nil && !errors.Is(err, ontimedriver.ErrNotFound) {
					callErrs++
					wantCorrupt(t, err, path)
				}
			}
			if err := d.Close(); err != nil {
				t.Logf("offset %d: Close: %v", off, err)
			}
		}
	}
	t.Logf("%d trials over %d pages: %d opens and %d calls reported damage, the rest read through", trials, pages, openErrs, callErrs)
}
