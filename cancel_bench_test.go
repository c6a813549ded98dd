package ontime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// BenchmarkCancelMany cancels b.N timers through the library on the
// embedded store, every other one of 2×b.N timers due in an hour in one
// topic (loaded with PublishBatch, 100-byte bodies), three ways, each on a
// fresh store in the same run:
//
//   - batch: one Client.CancelBatch call with all b.N ids (one store call,
//     one transaction, per CancelChunkSize ids);
//   - coalesced: 64 callers, each Client.Cancel of one id at a time
//     (concurrent Cancels share CancelBatch calls);
//   - one-by-one, the baseline: 64 callers, each the store's own Cancel of
//     one id at a time (what Client.Cancel did before it was coalesced),
//     on ONTIME_BENCH_BASELINE ids (default b.N/10: at its rate the full
//     count takes minutes; the rate does not depend on the count).
//
// Files go to ONTIMEBOLT_BENCH_DIR (default the system's temporary
// directory).
//
//	go test -run '^$' -bench CancelMany -benchtime 500000x .
func BenchmarkCancelMany(b *testing.B) {
	n := b.N
	base := n / 10
	if v := os.Getenv("ONTIME_BENCH_BASELINE"); v != "" {
		var err error
		if base, err = strconv.Atoi(v); err != nil || base < 1 {
			b.Fatalf("ONTIME_BENCH_BASELINE=%q: want a count", v)
		}
	}
	base = min(base, n)
	ctx := context.Background()
	b.StopTimer()
	batch := cancelRun(b, n, n, func(c *Client, ids []string) {
		res, err := c.CancelBatch(ctx, "bench", ids)
		if err != nil {
			b.Fatal(err)
		}
		for i, err := range res {
			if err != nil {
				b.Fatalf("cancel %s: %v", ids[i], err)
			}
		}
	})
	coalesced := cancelRun(b, n, n, func(c *Client, ids []string) {
		inCallers(64, len(ids), func(i int) {
			if err := c.Cancel(ctx, "bench", ids[i]); err != nil {
				b.Errorf("cancel %s: %v", ids[i], err)
			}
		})
	})
	oneByOne := cancelRun(b, n, base, func(c *Client, ids []string) {
		drv := c.Driver()
		inCallers(64, len(ids), func(i int) {
			if err := drv.Cancel(ctx, "bench", ids[i]); err != nil {
				b.Errorf("cancel %s: %v", ids[i], err)
			}
		})
	})
	b.ReportMetric(batch, "batch-cancels/s")
	b.ReportMetric(coalesced, "coalesced-cancels/s")
	b.ReportMetric(oneByOne, "one-by-one-cancels/s")
	b.ReportMetric(batch/oneByOne, "batch/one-by-one")
	b.ReportMetric(coalesced/oneByOne, "coalesced/one-by-one")
	b.ReportMetric(0, "ns/op")
}

// cancelRun opens a fresh embedded store, loads 2×n timers in topic
// "bench", cancels cancels of them (every other) with fn, checks that they
// are gone, and returns the cancel rate.
func cancelRun(b *testing.B, n, cancels int, fn func(c *Client, ids []string)) float64 {
	b.Helper()
	dir := os.Getenv("ONTIMEBOLT_BENCH_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	dir, err := os.MkdirTemp(dir, "ontime-cancel-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	drv, err := ontimebolt.Open(filepath.Join(dir, "timers.db"), &ontimebolt.Options{Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = drv.Close() }()
	c, err := NewClient(drv, &Config{Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	body := make([]byte, 100)
	for i := range body {
		body[i] = 'b'
	}
	ids := make([]string, 2*n)
	for i := range ids {
		ids[i] = newID()
	}
	const chunk = 1000
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= len(ids) {
					return
				}
				timers := make([]Timer, 0, chunk)
				for _, id := range ids[lo:min(lo+chunk, len(ids))] {
					timers = append(timers, Timer{ID: id, Body: body, Delay: time.Hour})
				}
				if _, err := c.PublishBatch(ctx, "bench", timers); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	half := make([]string, 0, cancels)
	for i := 0; i < len(ids) && len(half) < cancels; i += 2 {
		half = append(half, ids[i])
	}
	b.StartTimer()
	start := time.Now()
	fn(c, half)
	took := time.Since(start)
	b.StopTimer()
	if b.Failed() {
		b.FailNow()
	}
	left, err := c.Count(ctx, "bench")
	if err != nil || left.Scheduled != int64(2*n-cancels) {
		b.Fatalf("after %d cancels: %+v, %v; want %d scheduled", cancels, left, err, 2*n-cancels)
	}
	for _, id := range half[:min(len(half), 100)] {
		if _, err := c.Get(ctx, "bench", id); !errors.Is(err, ErrNotFound) {
			b.Fatalf("%s after its cancel: %v", id, err)
		}
	}
	return float64(cancels) / took.Seconds()
}

// inCallers calls fn(i) for every i in [0, n) from callers goroutines,
// each taking the next i.
func inCallers(callers, n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
