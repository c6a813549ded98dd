package harness

// Go benchmarks of the scenarios, one sub-benchmark per system. b.N is the
// number of timers (claims for BenchmarkClaimScale, idle queues for
// BenchmarkIdleFirstTimer), so -benchtime 100000x runs the 100k
// timers:
//
//	cd bench
//	go test -run '^$' -bench 'E2E|PublishBatch' -benchtime 100000x ./harness
//	go test -run '^$' -bench Lateness -benchtime 8000x ./harness   # 4 s at 2k/s
//	go test -run '^$' -bench 'Idle|Memory' ./harness
//	ONTIME_BENCH_SCALE=10k,1M go test -run '^$' -bench ClaimScale -benchtime 2000x ./harness
//
// They start their own redis-server (and PostgreSQL for river) on free
// loopback ports and skip when the binaries are missing.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
	"github.com/ontime-go/ontime/ontimeprom"
)

func TestMain(m *testing.M) {
	if ChildMain() {
		return
	}
	code := m.Run()
	shared.stop()
	os.Exit(code)
}

// sharedServers holds the servers the benchmarks share, started on first
// use.
type sharedServers struct {
	mu       sync.Mutex
	redis    *RedisServer
	redisErr error
	env      *env
}

var shared sharedServers

func (s *sharedServers) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.env != nil {
		s.env.pgMu.Lock()
		if s.env.pg != nil {
			s.env.pg.Stop()
		}
		s.env.pgMu.Unlock()
		_ = s.env.admin.Close()
	}
	s.redis.Stop()
}

// benchEnv returns the shared environment, skipping b when redis-server is
// not available.
func benchEnv(tb testing.TB) *env {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.env == nil && shared.redisErr == nil {
		shared.redis, shared.redisErr = StartRedis(context.Background(), "")
		if shared.redisErr == nil {
			cfg := Config{}.withDefaults()
			shared.env = &env{cfg: cfg, redis: shared.redis, logf: func(string, ...any) {}}
			shared.env.admin = shared.env.newRedis(nil, 8)
		}
	}
	if shared.redisErr != nil {
		tb.Skipf("no redis-server: %v", shared.redisErr)
	}
	return shared.env
}

// openSpec opens a system by name, skipping when its store is missing.
func openSpec(tb testing.TB, e *env, name string) (sysSpec, system) {
	for _, s := range allSpecs(e.cfg) {
		if s.Name != name {
			continue
		}
		if s.Store == "postgres" {
			if _, err := e.postgres(context.Background()); err != nil {
				tb.Skipf("no PostgreSQL: %v", err)
			}
		}
		sys, err := s.open(e)
		if err != nil {
			tb.Fatalf("open %s: %v", name, err)
		}
		tb.Cleanup(sys.close)
		return s, sys
	}
	tb.Fatalf("unknown system %q", name)
	return sysSpec{}, nil
}

func flush(tb testing.TB, e *env) {
	if err := e.admin.FlushAll(context.Background()).Err(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkE2E publishes b.N timers due now (batched where the system can)
// to running workers with instant handlers and times until every one was
// handled and acked: the DESIGN.md end-to-end target, and the embedded
// stores' (ontime-embedded, river-sqlite-tuned: files under
// ONTIME_BENCH_DIR or the temporary directory, fsync on).
func BenchmarkE2E(b *testing.B) {
	for _, name := range []string{"ontime", "ontime-compat", "asynq", "river", "pipeline", "ontime-embedded", "river-sqlite-tuned"} {
		b.Run(name, func(b *testing.B) {
			e := benchEnv(b)
			spec, sys := openSpec(b, e, name)
			runE2E(b, e, name, spec, sys)
		})
	}
}

// runE2E is one run of BenchmarkE2E on an opened system.
func runE2E(b *testing.B, e *env, name string, spec sysSpec, sys system) {
	flush(b, e)
	ctx := context.Background()
	n := b.N
	q := queueName(name, "gobench")
	t := newTracker(n)
	ts := make([]timer, n)
	for i := range ts {
		ts[i] = timer{body: t.body(time.Time{}, i, e.cfg.BodySize)}
	}
	stop, err := sys.work(ctx, q, e.cfg.W, t.handle)
	if err != nil {
		b.Fatal(err)
	}
	defer stop(ctx)
	time.Sleep(200 * time.Millisecond)
	batch := 1
	if spec.Batch {
		batch = e.cfg.Batch
	}
	rt0 := sys.roundTrips()
	var prof profSnap
	if profileHookOn() {
		prof = takeProfSnap(ctx, e)
	}
	b.ResetTimer()
	start := time.Now()
	if _, err := publishAll(ctx, sys, q, ts, batch, e.cfg.Publishers); err != nil {
		b.Fatal(err)
	}
	end, calls, err := waitDone(ctx, sys, q, t)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if profileHookOn() {
		prof.report(ctx, b, e, n)
	}
	b.ReportMetric(rate(n, end.Sub(start)), "timers/s")
	b.ReportMetric(float64(sys.roundTrips()-rt0)/float64(n), "roundtrips/timer")
	b.ReportMetric(float64(t.total.Load()-int64(n)), "redelivered")
	_ = calls
}

// BenchmarkE2EMetrics is BenchmarkE2E's ontime run (native layout) without
// and with the Prometheus metrics (ontimeprom: every hook, the store call
// timing included, a watched worker and a running sampler), to measure
// what the metrics cost (docs/observability.md):
//
//	cd bench
//	go test -run '^$' -bench E2EMetrics -benchtime 100000x -count 5 ./harness
func BenchmarkE2EMetrics(b *testing.B) {
	for _, metrics := range []bool{false, true} {
		name := "off"
		if metrics {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			e := benchEnv(b)
			var hooks []any
			if metrics {
				reg := prometheus.NewRegistry()
				m, err := ontimeprom.New(reg, nil)
				if err != nil {
					b.Fatal(err)
				}
				hooks = []any{m}
				b.Cleanup(func() {
					if n := fired(b, reg); n < float64(b.N) {
						b.Errorf("ontime_fired_total %v, want at least %d: the metrics saw less than the run", n, b.N)
					}
				})
			}
			sys, err := openOntimeWith(e, ontimeredis.Native, hooks)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(sys.close)
			spec := sysSpec{Name: "ontime", Batch: true}
			runE2E(b, e, "ontime", spec, sys)
		})
	}
}

// fired sums ontime_fired_total in reg.
func fired(tb testing.TB, reg prometheus.Gatherer) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "ontime_fired_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// rawZADD is redis-benchmark's rate measured by BenchmarkPublishBatch, for
// the ratio the systems after it report.
var rawZADD float64

// BenchmarkPublishBatch publishes b.N timers due in a day, in batches of
// 100 from 16 goroutines, and reports the rate as a share of
// `redis-benchmark -P 16` ZADD ops/s measured first in the same run.
func BenchmarkPublishBatch(b *testing.B) {
	b.Run("redis-benchmark", func(b *testing.B) {
		e := benchEnv(b)
		n := max(b.N, 200_000)
		b.ResetTimer()
		v, _, err := redisBenchmarkZADD(context.Background(), e.redis.Addr, n)
		if err != nil {
			b.Skip(err)
		}
		rawZADD = v
		b.ReportMetric(v, "ZADD/s")
		flush(b, e)
	})
	for _, name := range []string{"ontime", "ontime-compat", "asynq", "river", "pipeline"} {
		b.Run(name, func(b *testing.B) {
			e := benchEnv(b)
			spec, sys := openSpec(b, e, name)
			flush(b, e)
			if r, ok := sys.(interface{ reset(context.Context) error }); ok {
				_ = r.reset(context.Background())
			}
			t := newTracker(b.N)
			due := time.Now().Add(24 * time.Hour)
			ts := make([]timer, b.N)
			for i := range ts {
				ts[i] = timer{due: due, body: t.body(due, i, e.cfg.BodySize)}
			}
			batch := 1
			if spec.Batch {
				batch = e.cfg.Batch
			}
			b.ResetTimer()
			d, err := publishAll(context.Background(), sys, queueName(name, "gobench"), ts, batch, e.cfg.Publishers)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			r := rate(b.N, d)
			b.ReportMetric(r, "timers/s")
			if rawZADD > 0 {
				b.ReportMetric(100*r/rawZADD, "%of_raw_ZADD")
			}
		})
	}
}

// BenchmarkLateness publishes b.N timers at 2000/s, each due 50–500 ms
// after its publish, to running workers and reports fire-minus-due
// percentiles and the share that fired early.
func BenchmarkLateness(b *testing.B) {
	for _, name := range []string{"ontime", "ontime-compat", "asynq", "asynq-tuned", "river-tuned", "pipeline"} {
		b.Run(name, func(b *testing.B) {
			e := benchEnv(b)
			spec, sys := openSpec(b, e, name)
			flush(b, e)
			bb := &bench{env: e, rep: &Report{}, failed: map[string]bool{}}
			b.ResetTimer()
			r, _, err := bb.latenessRun(context.Background(), spec, sys, b.N)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(r.Summary.P50), "p50_ms")
			b.ReportMetric(float64(r.Summary.P99), "p99_ms")
			b.ReportMetric(float64(r.Summary.Max), "max_ms")
			b.ReportMetric(100*float64(r.Summary.EarlyShare), "%early")
			b.ReportMetric(float64(r.Lost), "lost")
		})
	}
}

// BenchmarkIdleFirstTimer starts workers on b.N fresh queues, leaves them
// idle for ONTIME_BENCH_IDLE (default 5s), then publishes one timer per
// queue due 100 ms later, and reports how late the worst one fired.
func BenchmarkIdleFirstTimer(b *testing.B) {
	idle := 5 * time.Second
	if v := os.Getenv("ONTIME_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("ONTIME_BENCH_IDLE: %v", err)
		}
		idle = d
	}
	for _, name := range []string{"ontime", "ontime-compat", "asynq", "asynq-tuned"} {
		b.Run(name, func(b *testing.B) {
			e := benchEnv(b)
			_, sys := openSpec(b, e, name)
			ctx := context.Background()
			ts := make([]*tracker, b.N)
			qs := make([]string, b.N)
			for i := range ts {
				ts[i], qs[i] = newTracker(1), queueName(name, "gobench_idle")
				stop, err := sys.work(ctx, qs[i], e.cfg.W, ts[i].handle)
				if err != nil {
					b.Fatal(err)
				}
				defer stop(ctx)
			}
			b.ResetTimer()
			time.Sleep(idle)
			for i := range ts {
				due := time.Now().Add(100 * time.Millisecond)
				if err := sys.publish(ctx, qs[i], []timer{{due: due, body: ts[i].body(due, 0, e.cfg.BodySize)}}, 1); err != nil {
					b.Fatal(err)
				}
			}
			var lat []float64
			for _, t := range ts {
				select {
				case <-t.done:
					lat = append(lat, float64(t.late[0])/1e6)
				case <-time.After(20 * time.Second):
					b.Fatalf("the first timer was not delivered within 20s")
				}
			}
			b.StopTimer()
			s := summarize(lat)
			b.ReportMetric(float64(s.Max), "worst_late_ms")
			b.ReportMetric(float64(s.P50), "p50_late_ms")
		})
	}
}

// BenchmarkMemoryPerTimer publishes max(b.N, 20000) timers with 100-byte
// bodies due in a day and reports Redis used_memory growth per timer.
func BenchmarkMemoryPerTimer(b *testing.B) {
	for _, name := range []string{"ontime", "ontime-compat", "asynq", "pipeline"} {
		b.Run(name, func(b *testing.B) {
			e := benchEnv(b)
			spec, sys := openSpec(b, e, name)
			bb := &bench{env: e, rep: &Report{}, failed: map[string]bool{}}
			bb.cfg.MemoryTimers = max(b.N, 20000)
			b.ResetTimer()
			v, err := bb.memoryRun(context.Background(), spec, sys, 100)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(v, "bytes/timer")
			flush(b, e)
		})
	}
}

// BenchmarkClaimScale grows one native topic to each size of
// ONTIME_BENCH_SCALE (default 10k,1M) with far-future timers and times b.N
// claims of one trickled due timer at each size.
func BenchmarkClaimScale(b *testing.B) {
	sizes := []int{10_000, 1_000_000}
	if v := os.Getenv("ONTIME_BENCH_SCALE"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := parseCountTest(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	p99 := map[int]float64{} // by size, from the last run of each
	for _, size := range sizes {
		b.Run(fmt.Sprintf("pending=%s", fmtShort(float64(size))), func(b *testing.B) {
			e := benchEnv(b)
			spec, sys := openSpec(b, e, "ontime")
			bb := &bench{env: e, rep: &Report{}, failed: map[string]bool{}}
			bb.cfg.ScaleSizes = []int{size}
			bb.cfg.ScaleClaims = b.N
			b.ResetTimer()
			res := bb.scaleSystem(context.Background(), spec, sys)
			b.StopTimer()
			flush(b, e)
			if res.Err != "" || len(res.Sizes) != 1 {
				b.Fatalf("scale: %s", res.Err)
			}
			s := res.Sizes[0].Claim
			b.ReportMetric(float64(s.P50), "claim_p50_ms")
			b.ReportMetric(float64(s.P99), "claim_p99_ms")
			p99[size] = float64(s.P99)
			if size != sizes[0] && p99[sizes[0]] > 0 {
				b.ReportMetric(float64(s.P99)/p99[sizes[0]], "p99_vs_smallest")
			}
		})
	}
}

func parseCountTest(s string) (int, error) {
	s = strings.TrimSpace(s)
	mul := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mul, s = 1000, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mul, s = 1_000_000, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad count %q", s)
	}
	return v * mul, nil
}
