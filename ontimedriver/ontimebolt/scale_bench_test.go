package ontimebolt_test

import (
	"bytes"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// The embedded store at scale. Files go to ONTIMEBOLT_BENCH_DIR (default
// the system's temporary directory; a real disk, not a tmpfs). Timers
// carry 150-byte payloads (a 100-byte body in the library's envelope) and
// UUIDv7 ids, as the library makes them.

var benchPayload = bytes.Repeat([]byte("p"), 150)

// loadIDs schedules one timer per id in topic (topicOf(i) when topicOf is
// not nil), due after delay, in calls of 1000 from 4 goroutines, and
// returns the rate.
func loadIDs(b *testing.B, d *ontimebolt.Driver, ids []string, topicOf func(i int) string, delay time.Duration) float64 {
	b.Helper()
	start := time.Now()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	const chunk = 1000
	for range 4 {
		wg.Go(func() {
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= len(ids) {
					return
				}
				hi := min(lo+chunk, len(ids))
				// one topic per call: a call of one-timer topics is split
				if topicOf != nil {
					for i := lo; i < hi; i++ {
						schedule(b, d, topicOf(i), ontimedriver.NewTimer{ID: ids[i], Delay: delay, Payload: benchPayload})
					}
					continue
				}
				ts := make([]ontimedriver.NewTimer, 0, hi-lo)
				for _, id := range ids[lo:hi] {
					ts = append(ts, ontimedriver.NewTimer{ID: id, Delay: delay, Payload: benchPayload})
				}
				schedule(b, d, "bench", ts...)
			}
		})
	}
	wg.Wait()
	return float64(len(ids)) / time.Since(start).Seconds()
}

func newIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7()).String()
	}
	return ids
}

// cancelIDs cancels ids in topic "bench" through CancelBatch, 1000 per
// call from 4 callers, and returns the rate.
func cancelIDs(b *testing.B, d *ontimebolt.Driver, ids []string) float64 {
	b.Helper()
	start := time.Now()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	const chunk = 1000
	for range 4 {
		wg.Go(func() {
			for {
				lo := int(next.Add(chunk)) - chunk
				if lo >= len(ids) {
					return
				}
				res, err := d.CancelBatch(ctx, "bench", ids[lo:min(lo+chunk, len(ids))])
				if err != nil {
					b.Error(err)
					return
				}
				for i, err := range res {
					if err != nil {
						b.Errorf("cancel %s: %v", ids[lo+i], err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	return float64(len(ids)) / time.Since(start).Seconds()
}

// BenchmarkCancelBatch cancels b.N timers, every other one of 2×b.N timers
// due in an hour in one topic, through CancelBatch: 1000 ids per call
// from 4 callers.
//
//	go test -run '^$' -bench CancelBatch -benchtime 500000x ./ontimedriver/ontimebolt/
func BenchmarkCancelBatch(b *testing.B) {
	d := benchStore(b)
	ids := newIDs(2 * b.N)
	load := loadIDs(b, d, ids, nil, time.Hour)
	var half []string
	for i := 0; i < len(ids); i += 2 {
		half = append(half, ids[i])
	}
	commits0, st0 := ontimebolt.Commits(d), ontimebolt.TxStats(d)
	b.ResetTimer()
	rate := cancelIDs(b, d, half)
	b.StopTimer()
	b.ReportMetric(load, "load-timers/s")
	b.ReportMetric(rate, "cancels/s")
	reportCommits(b, d, commits0, st0, len(half))
}

// benchStore opens a fresh store in ONTIMEBOLT_BENCH_DIR, closed and
// removed at cleanup.
func benchStore(b *testing.B) *ontimebolt.Driver {
	b.Helper()
	dir, err := mkdirTemp(b, benchDir(b))
	if err != nil {
		b.Fatal(err)
	}
	return reopen(b, filepath.Join(dir, "timers.db"), nil)
}
