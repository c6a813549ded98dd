package ontimebolt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// The loaded-store benchmarks compare HandleTopics over loadedTopics
// topics on an empty store with the same on a store that holds
// ONTIMEBOLT_BENCH_PENDING (default 1,000,000) timers due in a year,
// spread over those topics, in one run: both stores are opened (and the
// loaded one filled, at the start, once) by the first benchmark that needs
// them, and each benchmark runs on the empty store, then on the loaded
// one, ONTIMEBOLT_BENCH_RUNS times (default 3), alternately. Files go to ONTIMEBOLT_BENCH_DIR
// (default the system's temporary directory; it must be a real disk, as
// fsync costs nothing on a tmpfs).
//
//	go test -run '^$' -bench 'Loaded' -benchtime 40000x ./ontimedriver/ontimebolt/
//
// e2e publishes b.N timers due now (16 publishers, batches of 100, each
// batch to the next topic) with the worker running and stops when every
// one was handled; lateness publishes b.N timers one per call at
// loadedRate per second, each due 50 to 150 ms after its publish, and
// reports fire minus due.
const (
	loadedTopics = 100
	loadedRate   = 2000
)

type loadedStores struct {
	once   sync.Once
	err    error
	dir    string
	stores map[string]*ontimebolt.Driver
}

var loaded loadedStores

func benchDir(b *testing.B) string {
	if d := os.Getenv("ONTIMEBOLT_BENCH_DIR"); d != "" {
		return d
	}
	return os.TempDir()
}

// mkdirTemp makes a directory under dir removed at cleanup.
func mkdirTemp(b *testing.B, dir string) (string, error) {
	d, err := os.MkdirTemp(dir, "ontimebolt-bench-")
	if err != nil {
		return "", err
	}
	b.Cleanup(func() { _ = os.RemoveAll(d) })
	return d, nil
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

func loadedTopic(i int) string { return fmt.Sprintf("tenant-%03d", i%loadedTopics) }

// loadedStore returns the "empty" or the "loaded" store.
func loadedStore(b *testing.B, which string) *ontimebolt.Driver {
	pending := envInt(b, "ONTIMEBOLT_BENCH_PENDING", 1_000_000)
	loaded.once.Do(func() {
		loaded.dir, loaded.err = os.MkdirTemp(benchDir(b), "ontimebolt-loaded-")
		if loaded.err != nil {
			return
		}
		loaded.stores = map[string]*ontimebolt.Driver{}
		for _, name := range []string{"empty", "loaded"} {
			d, err := ontimebolt.Open(filepath.Join(loaded.dir, name+".db"), &ontimebolt.Options{Logger: quiet})
			if err != nil {
				loaded.err = err
				return
			}
			loaded.stores[name] = d
		}
		start := time.Now()
		d := loaded.stores["loaded"]
		if loaded.err = fill(d, pending, 365*24*time.Hour); loaded.err != nil {
			return
		}
		took := time.Since(start)
		sp, err := d.Space()
		if err != nil {
			loaded.err = err
			return
		}
		b.Logf("loaded store: %d timers (100-byte bodies through the library, due in a year) over %d topics in %v (%.0f/s); file %.1f MB (%.0f B/timer), %.1f MB in use (%.0f B/timer)",
			pending, loadedTopics, took.Round(time.Millisecond), float64(pending)/took.Seconds(),
			float64(sp.File)/1e6, float64(sp.File)/float64(pending), float64(sp.File-sp.Free)/1e6, float64(sp.File-sp.Free)/float64(pending))
	})
	if loaded.err != nil {
		b.Fatal(loaded.err)
	}
	return loaded.stores[which]
}

// fill publishes n timers with 100-byte bodies due after delay, over
// loadedTopics topics, from 4 goroutines in batches of 1000.
func fill(d *ontimebolt.Driver, n int, delay time.Duration) error {
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if err != nil {
		return err
	}
	return publishBodies(c, n, 1000, 4, delay)
}

// publishBodies publishes n timers with 100-byte bodies due after delay,
// in batches of batch from workers goroutines, each batch to the next of
// loadedTopics topics.
func publishBodies(c *ontime.Client, n, batch, workers int, delay time.Duration) error {
	body := make([]byte, 100)
	var (
		first error
		once  sync.Once
	)
	inChunks(n, batch, workers, func(lo, hi int) {
		buf := make([]ontime.Timer, hi-lo)
		for i := range buf {
			buf[i] = ontime.Timer{Body: body, Delay: delay}
		}
		if _, err := c.PublishBatch(context.Background(), loadedTopic(lo/batch), buf); err != nil {
			once.Do(func() { first = err })
		}
	})
	return first
}

// runTopicsWorker runs a HandleTopics worker for every topic (MaxConcurrency
// 64 per topic) that calls h, and returns its stop function.
func runTopicsWorker(b *testing.B, c *ontime.Client, h func(m *ontime.Message[[]byte])) func() {
	w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
	err := ontime.HandleTopics(w, "*", func(_ context.Context, m *ontime.Message[[]byte]) error {
		h(m)
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: 64})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = w.Run(ctx); close(stopped) }()
	return func() { cancel(); <-stopped }
}

func BenchmarkLoaded(b *testing.B) {
	alternate(b, "e2e", []string{"empty", "loaded"}, func(b *testing.B, which string) { loadedE2E(b, loadedStore(b, which)) })
	alternate(b, "lateness", []string{"empty", "loaded"}, func(b *testing.B, which string) { loadedLateness(b, loadedStore(b, which)) })
}

// alternate runs fn for each of whiches in turn, ONTIMEBOLT_BENCH_RUNS
// times (default 3), as sub-benchmarks name/RUN/WHICH: the runs of the
// two sides alternate, so that a change in the machine's load falls on
// both (go test's -count would run one side's runs, then the other's).
func alternate(b *testing.B, name string, whiches []string, fn func(b *testing.B, which string)) {
	runs := envInt(b, "ONTIMEBOLT_BENCH_RUNS", 3)
	for r := range runs {
		for _, which := range whiches {
			b.Run(fmt.Sprintf("%s/%d/%s", name, r+1, which), func(b *testing.B) { fn(b, which) })
		}
	}
}

func loadedE2E(b *testing.B, d *ontimebolt.Driver) {
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	n := b.N
	var handled atomic.Int64
	done := make(chan struct{})
	stop := runTopicsWorker(b, c, func(*ontime.Message[[]byte]) {
		if handled.Add(1) == int64(n) {
			close(done)
		}
	})
	defer stop()
	commits0, st0 := ontimebolt.Commits(d), ontimebolt.TxStats(d)
	b.ResetTimer()
	if err := publishBodies(c, n, 100, 16, 0); err != nil {
		b.Error(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("handled %d of %d", handled.Load(), n)
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "timers/s")
	reportCommits(b, d, commits0, st0, n)
	reportFreelist(b, d)
}

// reportCommits reports commits per timer, and page writes and write time
// (pwrite and fdatasync) per commit, since commits0 and st0.
func reportCommits(b *testing.B, d *ontimebolt.Driver, commits0 int64, st0 bbolt.TxStats, n int) {
	commits := float64(ontimebolt.Commits(d) - commits0)
	st := ontimebolt.TxStats(d)
	b.ReportMetric(commits/float64(n), "commits/timer")
	b.ReportMetric(float64(st.GetWrite()-st0.GetWrite())/commits, "pagewrites/commit")
	b.ReportMetric(float64((st.GetWriteTime()-st0.GetWriteTime()).Microseconds())/commits, "writeµs/commit")
	b.ReportMetric(float64((st.GetSpillTime()-st0.GetSpillTime()).Microseconds())/commits, "spillµs/commit")
}

// reportFreelist reports the size of bbolt's free list.
func reportFreelist(b *testing.B, d *ontimebolt.Driver) {
	ds := ontimebolt.DBStats(d)
	b.ReportMetric(float64(ds.FreePageN), "freepages")
	b.ReportMetric(float64(ds.FreelistInuse)/1024, "freelist-KiB")
}

func loadedLateness(b *testing.B, d *ontimebolt.Driver) {
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	n := b.N
	var (
		mu    sync.Mutex
		late  = make([]float64, 0, n)
		early atomic.Int64
		done  = make(chan struct{})
	)
	commits0, st0 := ontimebolt.Commits(d), ontimebolt.TxStats(d)
	stop := runTopicsWorker(b, c, func(m *ontime.Message[[]byte]) {
		l := time.Since(m.Due)
		if l < 0 {
			early.Add(1)
		}
		mu.Lock()
		late = append(late, float64(l.Microseconds())/1000)
		if len(late) == n {
			close(done)
		}
		mu.Unlock()
	})
	defer stop()
	body := make([]byte, 100)
	items := make(chan int, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range items {
				delay := 50*time.Millisecond + time.Duration(i%101)*time.Millisecond
				if _, err := c.Publish(context.Background(), loadedTopic(i), body, ontime.In(delay)); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	b.ResetTimer()
	start := time.Now()
	interval := time.Second / loadedRate
	for i := 0; i < n; {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		for upto := min(n, int(time.Since(start)/interval)+1); i < upto; i++ {
			items <- i
		}
	}
	close(items)
	wg.Wait()
	select {
	case <-done:
	case <-time.After(time.Minute):
		b.Fatalf("handled %d of %d", len(late), n)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(late)
	q := func(p float64) float64 { return late[min(len(late)-1, int(p*float64(len(late))))] }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(late[len(late)-1], "max-ms")
	b.ReportMetric(float64(early.Load()), "early")
	reportCommits(b, d, commits0, st0, n)
	reportFreelist(b, d)
}

// Stores and directories benchmarks share across runs; closeLoaded closes
// and removes them.
var (
	sharedStores []*ontimebolt.Driver
	sharedDirs   []string
)

// closeLoaded closes the stores the benchmarks share and removes their
// files (TestMain calls it).
func closeLoaded() {
	for _, d := range loaded.stores {
		_ = d.Close()
	}
	if loaded.dir != "" {
		_ = os.RemoveAll(loaded.dir)
	}
	for _, d := range sharedStores {
		_ = d.Close()
	}
	for _, dir := range sharedDirs {
		_ = os.RemoveAll(dir)
	}
}
