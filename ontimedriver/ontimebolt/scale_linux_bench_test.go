package ontimebolt_test

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// BenchmarkTopicsOpen is the cost of topics with one timer each, at 20,000
// and 100,000 topics: load rate (one Schedule per topic from 16 callers),
// file bytes per timer, and Open's time with the file's pages dropped from
// the page cache (cold: posix_fadvise DONTNEED on the file, see
// coldcache_linux_test.go) and cached (warm), median of 3 each; then the
// same after every timer was cancelled (one Cancel per topic from 16
// callers, whose rate it reports too). One iteration per size:
//
//	go test -run '^$' -bench TopicsOpen -benchtime 1x ./ontimedriver/ontimebolt/
func BenchmarkTopicsOpen(b *testing.B) {
	for _, n := range []int{20_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				topicsOpen(b, n)
			}
		})
	}
}

func topicsOpen(b *testing.B, n int) {
	path := benchPath(b)
	d, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	topic := func(i int) string { return fmt.Sprintf("tenant-%06d", i) }
	ids := newIDs(n)
	each := func(fn func(i int)) float64 { return inChunks(n, 1, 16, func(i, _ int) { fn(i) }) }
	load := each(func(i int) {
		schedule(b, d, topic(i), ontimedriver.NewTimer{ID: ids[i], Delay: time.Hour, Payload: benchPayload})
	})
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(load, "load-timers/s")
	size := fileSize(b, path)
	b.ReportMetric(float64(size)/float64(n), "file-B/timer")
	cold, warm := openTimes(b, path, n)
	b.ReportMetric(cold, "cold-open-ms")
	b.ReportMetric(warm, "warm-open-ms")

	d, err = ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	cancel := each(func(i int) {
		if err := d.Cancel(ctx, topic(i), ids[i]); err != nil {
			b.Error(err)
		}
	})
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(cancel, "cancels/s")
	b.ReportMetric(float64(fileSize(b, path))/1e6, "cancelled-file-MB")
	cold, warm = openTimes(b, path, 0)
	b.ReportMetric(cold, "cancelled-cold-open-ms")
	b.ReportMetric(warm, "cancelled-warm-open-ms")
}

// openTimes returns the median time of 3 cold and of 3 warm Opens, in ms,
// checking that the store holds want topics.
func openTimes(b *testing.B, path string, want int) (cold, warm float64) {
	b.Helper()
	var colds, warms []float64
	for range 3 {
		for _, isCold := range []bool{true, false} {
			if isCold {
				dropCache(b, path)
			}
			start := time.Now()
			d, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
			took := float64(time.Since(start).Microseconds()) / 1000
			if err != nil {
				b.Fatal(err)
			}
			if isCold {
				colds = append(colds, took)
			} else {
				warms = append(warms, took)
			}
			if topics, err := d.Topics(ctx); err != nil || len(topics) != want {
				b.Fatalf("Topics after Open: %d, %v; want %d", len(topics), err, want)
			}
			if err := d.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	sort.Float64s(colds)
	sort.Float64s(warms)
	return colds[1], warms[1]
}

func fileSize(b *testing.B, path string) int64 {
	b.Helper()
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return info.Size()
}
