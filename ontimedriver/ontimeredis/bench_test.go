package ontimeredis_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// benchClient is a Client on a dedicated redis-server, so that the
// benchmark measures ontime and Redis, not other tests.
func benchClient(b *testing.B, layout ontimeredis.Layout) *ontime.Client {
	b.Helper()
	redistest.SkipIfNoRedis(b)
	srv := redistest.StartServer(b)
	d, err := ontimeredis.New(srv.NewClient(b), &ontimeredis.Options{Layout: layout, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	if err := d.Ping(context.Background()); err != nil {
		b.Fatal(err)
	}
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkDriver runs the shared driver benchmarks (package drivertest) on
// a dedicated redis-server, native layout; see ontimebolt's for the
// side-by-side command.
func BenchmarkDriver(b *testing.B) {
	redistest.SkipIfNoRedis(b)
	srv := redistest.StartServer(b)
	drivertest.Bench(b, drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			d, err := ontimeredis.New(srv.NewClient(t), &ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close() })
			return d
		},
	})
}

// BenchmarkEndToEnd publishes b.N timers due now (batches of 500), then one
// worker fires and acks them all with handlers that return at once. One op
// is one timer through publish, claim, handler and ack; timers/s is the
// rate of the whole run (publish included).
//
//	go test -run '^$' -bench EndToEnd -benchtime 100000x ./ontimedriver/ontimeredis/
func BenchmarkEndToEnd(b *testing.B) {
	for _, layout := range []ontimeredis.Layout{ontimeredis.Native, ontimeredis.Compatible} {
		b.Run(layout.String(), func(b *testing.B) {
			c := benchClient(b, layout)
			ctx := context.Background()
			var done atomic.Int64
			all := make(chan struct{})
			n := int64(b.N)
			w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
			if err := ontime.Handle(w, "e2e", func(ctx context.Context, m *ontime.Message[[]byte]) error {
				if done.Add(1) == n {
					close(all)
				}
				return nil
			}, &ontime.TopicOptions{MaxConcurrency: 512, ClaimBatch: 512}); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 100)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i += 500 {
				batch := make([]ontime.Timer, 0, 500)
				for j := i; j < min(i+500, b.N); j++ {
					batch = append(batch, ontime.Timer{Body: body})
				}
				if _, err := c.PublishBatch(ctx, "e2e", batch); err != nil {
					b.Fatal(err)
				}
			}
			published := time.Since(start)
			rctx, cancel := context.WithCancel(ctx)
			stopped := make(chan struct{})
			go func() { _ = w.Run(rctx); close(stopped) }()
			select {
			case <-all:
			case <-time.After(5 * time.Minute):
				b.Fatalf("fired %d of %d", done.Load(), b.N)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			cancel()
			<-stopped
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "timers/s")
			b.ReportMetric(float64(b.N)/published.Seconds(), "published/s")
		})
	}
}

// BenchmarkLateness publishes timers at a steady 2,000/s, each due 100 ms
// after its publish, for b.N timers, and reports the p50/p99/max lateness
// of the handler call behind the due time returned by Publish.
//
//	go test -run '^$' -bench Lateness -benchtime 10000x ./ontimedriver/ontimeredis/
func BenchmarkLateness(b *testing.B) {
	c := benchClient(b, ontimeredis.Native)
	ctx := context.Background()
	late := make(chan time.Duration, b.N)
	w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, "late", func(ctx context.Context, m *ontime.Message[[]byte]) error {
		late <- time.Since(m.Due)
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: 100}); err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = w.Run(rctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	time.Sleep(100 * time.Millisecond)
	b.ResetTimer()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for i := 0; i < b.N; {
		<-tick.C
		// 2 timers per ms tick = 2,000/s, whatever the ticker's jitter
		want := min(int(time.Since(start)/(500*time.Microsecond)), b.N)
		for ; i < want; i++ {
			if _, err := c.Publish(ctx, "late", "x", ontime.In(100*time.Millisecond)); err != nil {
				b.Fatal(err)
			}
		}
	}
	ds := make([]time.Duration, 0, b.N)
	for range b.N {
		select {
		case d := <-late:
			ds = append(ds, d)
		case <-time.After(time.Minute):
			b.Fatalf("fired %d of %d", len(ds), b.N)
		}
	}
	b.StopTimer()
	slices.Sort(ds)
	q := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))]) / 1e6 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
	if ds[0] < -time.Millisecond {
		b.Errorf("a timer fired %v early", -ds[0])
	}
}

// BenchmarkIdleFirstTimer: a worker idle on an empty topic (poll interval
// 5 s, so only the wake-up can be fast) gets a timer published due in
// 50 ms; one op is one such timer. Reports the mean and worst lateness.
//
//	go test -run '^$' -bench IdleFirstTimer -benchtime 50x ./ontimedriver/ontimeredis/
func BenchmarkIdleFirstTimer(b *testing.B) {
	c := benchClient(b, ontimeredis.Native)
	ctx := context.Background()
	late := make(chan time.Duration, 1)
	w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, "idle", func(ctx context.Context, m *ontime.Message[[]byte]) error {
		late <- time.Since(m.Due)
		return nil
	}, &ontime.TopicOptions{PollInterval: 5 * time.Second}); err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = w.Run(rctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	time.Sleep(200 * time.Millisecond)
	var sum, worst time.Duration
	b.ResetTimer()
	for i := range b.N {
		if _, err := c.Publish(ctx, "idle", fmt.Sprint(i), ontime.In(50*time.Millisecond)); err != nil {
			b.Fatal(err)
		}
		d := <-late
		sum += d
		worst = max(worst, d)
		time.Sleep(20 * time.Millisecond) // idle again
	}
	b.StopTimer()
	b.ReportMetric(float64(sum)/float64(b.N)/1e6, "mean-late-ms")
	b.ReportMetric(float64(worst)/1e6, "max-late-ms")
}
