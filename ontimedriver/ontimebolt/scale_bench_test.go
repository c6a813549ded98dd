package ontimebolt_test

import (
	"bytes"
	"os"
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
// carry 174-byte payloads (what the library writes for a 100-byte body) and
// UUIDv7 ids, as the library makes them.

var benchPayload = bytes.Repeat([]byte("p"), 174)

// inChunks calls fn for [lo, hi) chunks of [0, n) of size chunk from
// workers goroutines, and returns the rate of items per second.
func inChunks(n, chunk, workers int, fn func(lo, hi int)) float64 {
	start := time.Now()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= n {
					return
				}
				fn(lo, min(lo+chunk, n))
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// loadIDs schedules one timer per id in topic "bench", due after delay,
// in calls of 1000 from 4 goroutines, and returns the rate.
func loadIDs(b *testing.B, d *ontimebolt.Driver, ids []string, delay time.Duration) float64 {
	b.Helper()
	return inChunks(len(ids), 1000, 4, func(lo, hi int) {
		ts := make([]ontimedriver.NewTimer, 0, hi-lo)
		for _, id := range ids[lo:hi] {
			ts = append(ts, ontimedriver.NewTimer{ID: id, Delay: delay, Payload: benchPayload})
		}
		schedule(b, d, "bench", ts...)
	})
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
	return inChunks(len(ids), 1000, 4, func(lo, hi int) {
		res, err := d.CancelBatch(ctx, "bench", ids[lo:hi])
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
	})
}

// BenchmarkCancelBatch cancels b.N timers, every other one of 2×b.N timers
// due in an hour in one topic, through CancelBatch: 1000 ids per call
// from 4 callers.
//
//	go test -run '^$' -bench CancelBatch -benchtime 500000x ./ontimedriver/ontimebolt/
func BenchmarkCancelBatch(b *testing.B) {
	d := benchStore(b)
	ids := newIDs(2 * b.N)
	load := loadIDs(b, d, ids, time.Hour)
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
func benchStore(b *testing.B) *ontimebolt.Driver { return reopen(b, benchPath(b), nil) }

// benchPath is the path of a store file in a fresh directory under
// ONTIMEBOLT_BENCH_DIR, removed at cleanup.
func benchPath(b *testing.B) string {
	b.Helper()
	dir, err := mkdirTemp(b, benchDir(b))
	if err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, "timers.db")
}

// Space comes back: a file that held ONTIMEBOLT_BENCH_LOADED (default
// 1,000,000) timers due in an hour in one topic, of which every other was
// cancelled (CancelBatch), next to a fresh file, both made once by the
// first benchmark that needs them. BenchmarkPublishAfterCancel publishes
// b.N timers into each (16 callers, 100 per call, due in an hour), fresh
// first, ONTIMEBOLT_BENCH_RUNS times (default 3), alternately.
//
//	go test -run '^$' -bench PublishAfterCancel -benchtime 200000x ./ontimedriver/ontimebolt/
var afterCancel struct {
	once   sync.Once
	err    error
	stores map[string]*ontimebolt.Driver
	load   float64
	cancel float64
}

func afterCancelStore(b *testing.B, which string) *ontimebolt.Driver {
	n := envInt(b, "ONTIMEBOLT_BENCH_LOADED", 1_000_000)
	afterCancel.once.Do(func() {
		dir, err := os.MkdirTemp(benchDir(b), "ontimebolt-cancelled-")
		if err != nil {
			afterCancel.err = err
			return
		}
		sharedDirs = append(sharedDirs, dir)
		afterCancel.stores = map[string]*ontimebolt.Driver{}
		for _, name := range []string{"fresh", "after-cancel"} {
			d, err := ontimebolt.Open(filepath.Join(dir, name+".db"), &ontimebolt.Options{Logger: quiet})
			if err != nil {
				afterCancel.err = err
				return
			}
			afterCancel.stores[name] = d
			sharedStores = append(sharedStores, d)
		}
		d := afterCancel.stores["after-cancel"]
		ids := newIDs(n)
		afterCancel.load = loadIDs(b, d, ids, time.Hour)
		var half []string
		for i := 0; i < len(ids); i += 2 {
			half = append(half, ids[i])
		}
		afterCancel.cancel = cancelIDs(b, d, half)
		sp, err := d.Space()
		if err != nil {
			afterCancel.err = err
			return
		}
		b.Logf("after-cancel store: %d timers loaded at %.0f/s, %d cancelled at %.0f/s; file %d MB, %d MB free",
			n, afterCancel.load, len(half), afterCancel.cancel, sp.File>>20, sp.Free>>20)
	})
	if afterCancel.err != nil {
		b.Fatal(afterCancel.err)
	}
	return afterCancel.stores[which]
}

func BenchmarkPublishAfterCancel(b *testing.B) {
	alternate(b, "publish", []string{"fresh", "after-cancel"}, func(b *testing.B, which string) {
		d := afterCancelStore(b, which)
		ids := newIDs(b.N)
		commits0, st0 := ontimebolt.Commits(d), ontimebolt.TxStats(d)
		b.ResetTimer()
		rate := inChunks(len(ids), 100, 16, func(lo, hi int) {
			ts := make([]ontimedriver.NewTimer, 0, hi-lo)
			for _, id := range ids[lo:hi] {
				ts = append(ts, ontimedriver.NewTimer{ID: id, Delay: time.Hour, Payload: benchPayload})
			}
			schedule(b, d, "bench", ts...)
		})
		b.StopTimer()
		b.ReportMetric(rate, "timers/s")
		reportCommits(b, d, commits0, st0, b.N)
		reportFreelist(b, d)
	})
}

// BenchmarkCompact compacts a file that held 2×b.N timers (one topic, due
// in an hour) of which every other was cancelled: the file's size before
// and after, per timer kept, and the time Compact took.
//
//	go test -run '^$' -bench Compact -benchtime 500000x ./ontimedriver/ontimebolt/
func BenchmarkCompact(b *testing.B) {
	path := benchPath(b)
	d, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ids := newIDs(2 * b.N)
	loadIDs(b, d, ids, time.Hour)
	var half []string
	for i := 0; i < len(ids); i += 2 {
		half = append(half, ids[i])
	}
	cancelIDs(b, d, half)
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	before, after, err := ontimebolt.Compact(path, &ontimebolt.Options{Logger: quiet})
	took := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(before)/1e6, "before-MB")
	b.ReportMetric(float64(after)/1e6, "after-MB")
	b.ReportMetric(float64(after)/float64(b.N), "after-B/timer")
	b.ReportMetric(took.Seconds(), "compact-s")
}
