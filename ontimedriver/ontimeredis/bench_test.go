package ontimeredis_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	redistest.RequireRedis(b)
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
	redistest.RequireRedis(b)
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

// BenchmarkScriptCost measures the Redis server's work per timer for each
// script of the worker's hot path, phase by phase on a dedicated server:
// schedule b.N timers due now (batches of 100), claim them all (batches
// of the sub-benchmark's size), then ack them all (same batches). For each
// phase it reports the scripts' own time (INFO commandstats, evalsha
// usec) and the server's CPU (INFO cpu, which adds parsing and networking)
// per timer.
//
//	go test -run '^$' -bench ScriptCost -benchtime 100000x ./ontimedriver/ontimeredis/
func BenchmarkScriptCost(b *testing.B) {
	for _, layout := range []ontimeredis.Layout{ontimeredis.Native, ontimeredis.Compatible} {
		for _, batch := range []int{32, 256} {
			b.Run(fmt.Sprintf("%s/batch=%d", layout, batch), func(b *testing.B) {
				benchScriptCost(b, layout, batch)
			})
		}
	}
}

func benchScriptCost(b *testing.B, layout ontimeredis.Layout, batch int) {
	redistest.RequireRedis(b)
	srv := redistest.StartServer(b)
	rdb := srv.NewClient(b)
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Layout: layout, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	if err := d.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	snap := func() (usec, cpu float64) {
		info, err := rdb.Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "cmdstat_evalsha":
				for _, kv := range strings.Split(v, ",") {
					if s, ok := strings.CutPrefix(kv, "usec="); ok {
						usec, _ = strconv.ParseFloat(s, 64)
					}
				}
			case "used_cpu_user", "used_cpu_sys":
				f, _ := strconv.ParseFloat(v, 64)
				cpu += f * 1e6
			}
		}
		return usec, cpu
	}
	n := b.N
	payload := make([]byte, 180)
	report := func(name string, f func()) {
		u0, c0 := snap()
		f()
		u1, c1 := snap()
		b.ReportMetric((u1-u0)/float64(n), name+"_script_us/timer")
		b.ReportMetric((c1-c0)/float64(n), name+"_cpu_us/timer")
	}
	b.ResetTimer()
	report("schedule", func() {
		ts := make([]ontimedriver.NewTimer, 0, 100)
		for i := 0; i < n; i += 100 {
			ts = ts[:0]
			for j := i; j < min(i+100, n); j++ {
				ts = append(ts, ontimedriver.NewTimer{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", j, j), Payload: payload})
			}
			if _, err := d.Schedule(ctx, "cost", ts, ontimedriver.Upsert); err != nil {
				b.Fatal(err)
			}
		}
	})
	var claimed []ontimedriver.ClaimedTimer
	report("claim", func() {
		for len(claimed) < n {
			res, err := d.Claim(ctx, "cost", batch, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Timers) == 0 {
				b.Fatalf("claimed %d of %d", len(claimed), n)
			}
			claimed = append(claimed, res.Timers...)
		}
	})
	report("settle", func() {
		ops := make([]ontimedriver.Settlement, 0, batch)
		for i := 0; i < len(claimed); i += batch {
			ops = ops[:0]
			for _, t := range claimed[i:min(i+batch, len(claimed))] {
				ops = append(ops, ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: t.ID, Token: t.Token}, Kind: ontimedriver.Ack})
			}
			res, err := d.Settle(ctx, "cost", ops)
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range res {
				if e != nil {
					b.Fatal(e)
				}
			}
		}
	})
	b.StopTimer()
}

// BenchmarkCompatPublishBehindHead publishes timers one by one on the
// compatible layout, each due after the topic's head (an hour out), while
// a Go worker is subscribed to the topic's wake-ups (four subscribers:
// four workers). Every such publish now sends a wake-up (a Python head may
// be unknown to the workers); this is its cost, one PUBLISH per call.
//
//	go test -run '^$' -bench CompatPublishBehindHead -benchtime 20000x ./ontimedriver/ontimeredis/
func BenchmarkCompatPublishBehindHead(b *testing.B) {
	c := benchClient(b, ontimeredis.Compatible)
	ctx := context.Background()
	if _, err := c.Publish(ctx, "behind", "head", ontime.In(time.Hour)); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	var drained sync.WaitGroup
	b.Cleanup(func() { close(stop); drained.Wait() })
	for range 4 {
		wake, cancel, err := c.Driver().Subscribe(ctx, "behind")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cancel)
		drained.Go(func() {
			for {
				select {
				case <-wake:
				case <-stop:
					return
				}
			}
		})
	}
	body := make([]byte, 100)
	b.ResetTimer()
	for range b.N {
		if _, err := c.Publish(ctx, "behind", body, ontime.In(2*time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListRecurring: one page of 1000 of a topic's recurring timers,
// with few or many schedules and plain timers in the topic. The cost of a
// page grows with the schedules (the script sorts the topic's schedule
// ids), not with the plain timers, which it never reads.
func BenchmarkListRecurring(b *testing.B) {
	redistest.RequireRedis(b)
	srv := redistest.StartServer(b)
	ctx := context.Background()
	for _, tc := range []struct{ schedules, plain int }{{10, 0}, {10, 100_000}, {1000, 0}, {10_000, 0}} {
		b.Run(fmt.Sprintf("schedules=%d/plain=%d", tc.schedules, tc.plain), func(b *testing.B) {
			d, err := ontimeredis.New(srv.NewClient(b), &ontimeredis.Options{Prefix: redistest.Prefix(b), Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = d.Close() })
			at := time.Now().Add(time.Hour)
			for i := 0; i < tc.plain; i += 1000 {
				batch := make([]ontimedriver.NewTimer, min(1000, tc.plain-i))
				for j := range batch {
					batch[j] = ontimedriver.NewTimer{ID: fmt.Sprintf("p%07d", i+j), At: at, Payload: []byte("x")}
				}
				if _, err := d.Schedule(ctx, "t", batch, ontimedriver.Upsert); err != nil {
					b.Fatal(err)
				}
			}
			for i := range tc.schedules {
				nr := ontimedriver.NewRecurring{ID: fmt.Sprintf("s%07d", i), Spec: "every 1h", At: at.Add(time.Hour), Tick: 1, Payload: []byte("x")}
				if _, err := d.ScheduleRecurring(ctx, "t", nr, ontimedriver.Upsert); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				p, err := d.ListRecurring(ctx, "t", "", 1000)
				if err != nil || len(p.Timers) != min(tc.schedules, 1000) {
					b.Fatalf("ListRecurring: %d timers, %v", len(p.Timers), err)
				}
			}
		})
	}
}
