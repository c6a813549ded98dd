package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// ManyTopicsIdle is the idle cost of `ontime serve` on the harness's Redis
// with one far-future timer in each of Topics topics.
type ManyTopicsIdle struct {
	Topics int `json:"topics"`
	// ServerPct and RedisPct are the CPU the server process and
	// redis-server used over the window, in % of one core.
	ServerPct F      `json:"server_cpu_pct"`
	RedisPct  F      `json:"redis_cpu_pct"`
	Window    string `json:"window"`
	Err       string `json:"error,omitempty"`
}

// ManyTopicsLateness is the lateness of timers published at a steady rate
// spread over Topics topics, served by one worker.
type ManyTopicsLateness struct {
	Topics int `json:"topics"`
	// How the worker serves them: "Handle" (one topic) or "HandleTopics".
	How     string         `json:"how"`
	Runs    []LatenessRun  `json:"runs"`
	Median  LatencySummary `json:"median"`
	Err     string         `json:"error,omitempty"`
	samples []float64
}

// ManyTopicsResult holds the many-topics scenario.
type ManyTopicsResult struct {
	Idle     []ManyTopicsIdle     `json:"idle"`
	Lateness []ManyTopicsLateness `json:"lateness"`
}

// manyTopics measures what many topics cost: `ontime serve` (native
// layout, serve_topics "*", built from this tree) idle with one timer due
// in a day in each of ManyTopicsCounts topics, CPU of the server and of
// redis-server over ManyTopicsIdleFor; and the lateness of Rate timers/s
// for LatenessFor, each due DelayMin..DelayMax after its publish, spread
// over ManyTopicsLatenessTopics topics and served by one HandleTopics
// worker, next to the same load on one topic served by Handle.
func (b *bench) manyTopics(ctx context.Context) {
	cfg := b.cfg
	b.logf("== manytopics: idle with %v topics for %s; lateness at %d/s over %d topics vs 1, %d runs",
		cfg.ManyTopicsCounts, cfg.ManyTopicsIdleFor, cfg.Rate, cfg.ManyTopicsLatenessTopics, cfg.Runs)
	res := &ManyTopicsResult{}
	b.rep.ManyTopics = res

	if !cfg.ManyTopicsLatenessOnly {
		b.manyTopicsIdleAll(ctx, res)
	}

	// The one-topic and the many-topic runs alternate (1, N, 1, N, ...),
	// so that on a machine whose load changes the ratio of each pair is
	// measured under about the same load.
	lrs := []*ManyTopicsLateness{
		{Topics: 1, How: "Handle"},
		{Topics: cfg.ManyTopicsLatenessTopics, How: "HandleTopics"},
	}
runs:
	for run := range cfg.Runs {
		for _, lr := range lrs {
			if ctx.Err() != nil {
				return
			}
			if lr.Err != "" {
				break runs
			}
			r, samples, err := b.manyTopicsLateness(ctx, lr.Topics, run)
			if err != nil {
				lr.Err = err.Error()
				b.errorf("manytopics lateness %d topics run %d: %v", lr.Topics, run+1, err)
				break runs
			}
			b.logf("manytopics lateness %5d topics (%s) run %d: p50 %.2fms p99 %.2fms max %.1fms early %.1f%% lost %d, at %.0f/s",
				lr.Topics, lr.How, run+1, r.Summary.P50, r.Summary.P99, r.Summary.Max, 100*r.Summary.EarlyShare, r.Lost, r.Rate)
			lr.Runs = append(lr.Runs, r)
			lr.samples = append(lr.samples, samples...)
		}
		if len(lrs[0].Runs) == run+1 && len(lrs[1].Runs) == run+1 && lrs[0].Runs[run].Summary.P99 > 0 {
			b.logf("manytopics lateness run %d: p99 %d topics / 1 topic = %.2f×", run+1, lrs[1].Topics,
				lrs[1].Runs[run].Summary.P99/lrs[0].Runs[run].Summary.P99)
		}
	}
	for _, lr := range lrs {
		sums := make([]LatencySummary, len(lr.Runs))
		for i, r := range lr.Runs {
			sums[i] = r.Summary
		}
		lr.Median = medianSummary(sums)
		res.Lateness = append(res.Lateness, *lr)
	}
}

// manyTopicsIdleAll measures the idle cost for each of ManyTopicsCounts.
func (b *bench) manyTopicsIdleAll(ctx context.Context, res *ManyTopicsResult) {
	tmp, err := os.MkdirTemp(benchDataDir(), "ontime-bench-topics-")
	if err != nil {
		b.errorf("manytopics: %v", err)
		return
	}
	defer os.RemoveAll(tmp)
	builds, err := b.httpBuilds(ctx, tmp, false)
	if err != nil {
		b.errorf("manytopics: %v", err)
		return
	}
	for _, n := range b.cfg.ManyTopicsCounts {
		if ctx.Err() != nil {
			return
		}
		r := b.manyTopicsIdle(ctx, builds[0].bin, n)
		if r.Err != "" {
			b.errorf("manytopics idle %d: %s", n, r.Err)
		} else {
			b.logf("manytopics idle %7d topics: server %.2f%% of a core, redis-server %.2f%%", n, r.ServerPct, r.RedisPct)
		}
		res.Idle = append(res.Idle, r)
	}
}

// manyTopicsIdle fills n topics with one timer each, due in a day, starts
// `ontime serve` on them and measures its CPU and Redis's while idle.
func (b *bench) manyTopicsIdle(ctx context.Context, bin string, n int) ManyTopicsIdle {
	r := ManyTopicsIdle{Topics: n, Window: b.cfg.ManyTopicsIdleFor.String()}
	prefix := fmt.Sprintf("benchtopics%d:", queueSeq.Add(1))
	rdb := b.newRedis(nil, 32)
	defer rdb.Close()
	drv, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: prefix, Logger: quietSlog()})
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer drv.Close()
	defer b.dropPrefix(context.WithoutCancel(ctx), prefix)
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quietSlog()})
	if err != nil {
		r.Err = err.Error()
		return r
	}
	// Fill: one timer per topic, from 32 goroutines.
	jobs := make(chan int, 1024)
	var wg sync.WaitGroup
	var once sync.Once
	var ferr error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if _, err := client.Publish(ctx, "tenant-"+strconv.Itoa(i), "x", ontime.In(24*time.Hour)); err != nil {
					once.Do(func() { ferr = err })
				}
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if ferr != nil {
		r.Err = "fill: " + ferr.Error()
		return r
	}

	port, err := freePort()
	if err != nil {
		r.Err = err.Error()
		return r
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := newCommand(bin, "serve", "--listen", addr, "--log-level", "warn",
		"--redis", "redis://"+b.redis.Addr, "--redis-prefix", prefix)
	srv, err := startChild(cmd)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer srv.stop(syscall.SIGTERM, 10*time.Second)
	if err := waitHealthy(ctx, "http://"+addr, srv); err != nil {
		r.Err = err.Error()
		return r
	}
	// Let the start-up work (a first look at the index, the first metrics
	// sample) pass.
	if !sleepCtx(ctx, 5*time.Second) {
		r.Err = ctx.Err().Error()
		return r
	}
	s0, r0, t0 := procCPU(srv.cmd.Process.Pid), redisCPU(ctx, b.admin), time.Now()
	if !sleepCtx(ctx, b.cfg.ManyTopicsIdleFor) {
		r.Err = ctx.Err().Error()
		return r
	}
	s1, r1, t1 := procCPU(srv.cmd.Process.Pid), redisCPU(ctx, b.admin), time.Now()
	secs := t1.Sub(t0).Seconds()
	r.ServerPct = F(100 * (s1 - s0) / secs)
	r.RedisPct = F(100 * (r1 - r0) / secs)
	if !srv.alive() {
		r.Err = "ontime serve exited: " + srv.out.String()
	}
	return r
}

// manyTopicsLateness publishes Rate timers/s for LatenessFor over topics
// topics (one Publish each, At a random DelayMin..DelayMax ahead) with one
// worker running, and records fire minus due.
func (b *bench) manyTopicsLateness(ctx context.Context, topics, run int) (LatenessRun, []float64, error) {
	cfg := b.cfg
	n := int(float64(cfg.Rate) * cfg.LatenessFor.Seconds())
	prefix := fmt.Sprintf("benchtopicslat%d:", queueSeq.Add(1))
	rdb := b.newRedis(nil, 64)
	defer rdb.Close()
	drv, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: prefix, Logger: quietSlog()})
	if err != nil {
		return LatenessRun{}, nil, err
	}
	defer drv.Close()
	defer b.dropPrefix(context.WithoutCancel(ctx), prefix)
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quietSlog()})
	if err != nil {
		return LatenessRun{}, nil, err
	}
	t := newTracker(n)
	var cur atomic.Pointer[tracker]
	cur.Store(t)
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quietSlog(), ShutdownTimeout: 10 * time.Second})
	h := func(_ context.Context, m *ontime.Message[[]byte]) error {
		cur.Load().handle(m.Body)
		return nil
	}
	if topics == 1 {
		err = ontime.Handle(w, "t-0", h, &ontime.TopicOptions{MaxConcurrency: cfg.W})
	} else {
		err = ontime.HandleTopics(w, "t-*", h, nil)
	}
	if err != nil {
		return LatenessRun{}, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
		<-done
	}()
	time.Sleep(300 * time.Millisecond)

	// A warm-up of the same load, not recorded: a worker serving many
	// topics starts each one the first time it has a timer (and keeps it
	// while it gets timers), so what is measured is a server that has
	// been running, not its first seconds; the one-topic baseline gets
	// the same warm-up.
	warm := newTracker(int(float64(cfg.Rate) * manyTopicsWarmUp.Seconds()))
	cur.Store(warm)
	if _, err := b.paceTopics(ctx, client, warm, warm.n, topics); err != nil {
		return LatenessRun{}, nil, fmt.Errorf("warm-up: %w", err)
	}
	cur.Store(t) // warm-up timers still due now are not counted in t
	c0, r0 := procCPU(os.Getpid()), redisCPU(ctx, b.admin)
	took, perr := b.paceTopics(ctx, client, t, n, topics)
	if perr != nil {
		return LatenessRun{}, nil, fmt.Errorf("publish: %w", perr)
	}
	// What the worker holds at the end of the publishing (the harness's
	// own goroutines and heap included, the same in both runs).
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.logf("manytopics lateness %5d topics run %d: at the end of publishing %d goroutines, heap %.1f MB in use, %d GCs so far",
		topics, run+1, runtime.NumGoroutine(), float64(ms.HeapInuse)/1e6, ms.NumGC)
	wctx, cancel := context.WithTimeout(ctx, cfg.DelayMax+20*time.Second)
	defer cancel()
	select {
	case <-t.done:
	case <-wctx.Done():
	}
	// CPU per timer (publishing included, the same in both runs): on a
	// machine shared with other work, lateness is noisy, CPU time much
	// less so.
	c1, r1 := procCPU(os.Getpid()), redisCPU(ctx, b.admin)
	b.logf("manytopics lateness %5d topics run %d: CPU per timer: harness (publishers + worker) %.1f µs, redis-server %.1f µs",
		topics, run+1, (c1-c0)*1e6/float64(n), (r1-r0)*1e6/float64(n))
	samples := t.latenessMs()
	return LatenessRun{
		Summary:     summarize(samples),
		Rate:        F(rate(n, took)),
		Lost:        n - len(samples),
		Redelivered: t.total.Load() - int64(len(samples)),
	}, samples, nil
}

// dropPrefix deletes the keys under prefix (SCAN + UNLINK).
func (b *bench) dropPrefix(ctx context.Context, prefix string) {
	iter := b.admin.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	batch := make([]string, 0, 1000)
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == cap(batch) {
			b.admin.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		b.admin.Unlink(ctx, batch...)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// newCommand is exec.Command with the environment `ontime serve` runs in
// here (no ONTIME_ variables of the caller's).
func newCommand(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = serveEnv()
	cmd.Dir = filepath.Dir(bin)
	return cmd
}

// manyTopicsWarmUp is how long the many-topics lateness runs publish the
// same load before the measured part.
const manyTopicsWarmUp = 5 * time.Second

// paceTopics publishes n timers for t at cfg.Rate per second, one Publish
// each, At a random DelayMin..DelayMax ahead, round-robin over topics
// topics; it returns how long publishing took.
func (b *bench) paceTopics(ctx context.Context, client *ontime.Client, t *tracker, n, topics int) (time.Duration, error) {
	cfg := b.cfg
	items := make(chan int, n)
	var wg sync.WaitGroup
	var once sync.Once
	var perr error
	for range cfg.Publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range items {
				delay := cfg.DelayMin
				if cfg.DelayMax > cfg.DelayMin {
					delay += rand.N(cfg.DelayMax - cfg.DelayMin)
				}
				due := time.Now().Add(delay)
				topic := "t-" + strconv.Itoa(i%topics)
				if _, err := client.Publish(ctx, topic, t.body(due, i, cfg.BodySize), ontime.At(due)); err != nil {
					once.Do(func() { perr = err })
				}
			}
		}()
	}
	start := time.Now()
	feedPaced(ctx, items, n, cfg.Rate)
	wg.Wait()
	return time.Since(start), perr
}
