package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// opened is a system opened for a scenario, with the scenario's result
// for it.
type opened[R any] struct {
	spec sysSpec
	sys  system
	res  *R
}

// openSystems opens specs (one that fails is reported by b.open and left
// out), each with a fresh result, and returns a func that closes them.
func openSystems[R any](b *bench, specs []sysSpec, newRes func(sysSpec) *R) ([]*opened[R], func()) {
	var all []*opened[R]
	for _, spec := range specs {
		if sys := b.open(spec); sys != nil {
			all = append(all, &opened[R]{spec: spec, sys: sys, res: newRes(spec)})
		}
	}
	return all, func() {
		for _, s := range all {
			s.sys.close()
		}
	}
}

// LatenessRun is one run of the lateness scenario for one system.
type LatenessRun struct {
	Summary LatencySummary `json:"summary"`
	// Rate is the publish rate achieved, timers/s.
	Rate F `json:"rate"`
	// Lost counts timers not delivered before the phase timed out.
	Lost        int   `json:"lost"`
	Redelivered int64 `json:"redelivered"`
}

// LatenessResult holds a system's runs, their medians and all samples (for
// the CDF chart).
type LatenessResult struct {
	System  string         `json:"system"`
	Runs    []LatenessRun  `json:"runs"`
	Median  LatencySummary `json:"median"`
	Err     string         `json:"error,omitempty"`
	samples []float64
}

func (b *bench) lateness(ctx context.Context, specs []sysSpec) {
	cfg := b.cfg
	n := int(float64(cfg.Rate) * cfg.LatenessFor.Seconds())
	b.logf("== lateness: R=%d/s for %s (%d timers), delay %s..%s, W=%d, %d runs",
		cfg.Rate, cfg.LatenessFor, n, cfg.DelayMin, cfg.DelayMax, cfg.W, cfg.Runs)
	all, closeAll := openSystems(b, specs, func(spec sysSpec) *LatenessResult { return &LatenessResult{System: spec.Name} })
	defer closeAll()
	for run := range cfg.Runs {
		for _, s := range all {
			if s.res.Err != "" || ctx.Err() != nil {
				continue
			}
			r, samples, err := b.latenessRun(ctx, s.spec, s.sys, n)
			if err != nil {
				s.res.Err = err.Error()
				b.errorf("lateness %s run %d: %v", s.spec.Name, run+1, err)
				continue
			}
			b.logf("lateness %-14s run %d: p50 %.2fms p99 %.2fms max %.1fms early %.1f%% (max %.1fms) lost %d, at %.0f/s",
				s.spec.Name, run+1, r.Summary.P50, r.Summary.P99, r.Summary.Max, 100*r.Summary.EarlyShare, r.Summary.EarlyMax, r.Lost, r.Rate)
			s.res.Runs = append(s.res.Runs, r)
			s.res.samples = append(s.res.samples, samples...)
		}
	}
	for _, s := range all {
		sums := make([]LatencySummary, len(s.res.Runs))
		for i, r := range s.res.Runs {
			sums[i] = r.Summary
		}
		s.res.Median = medianSummary(sums)
		b.rep.Lateness = append(b.rep.Lateness, *s.res)
	}
}

// latenessRun publishes n timers at cfg.Rate per second, each due a uniform
// random delay in [DelayMin, DelayMax] after its publish, with workers
// running, and records fire time minus due time.
func (b *bench) latenessRun(ctx context.Context, spec sysSpec, s system, n int) (LatenessRun, []float64, error) {
	cfg := b.cfg
	timeout := cfg.LatenessFor + cfg.DelayMax + 20*time.Second
	pctx, cancel := context.WithTimeout(ctx, timeout+cfg.PhaseTimeout)
	defer cancel()
	if err := reset(pctx, s); err != nil {
		return LatenessRun{}, nil, err
	}
	q := queueName(spec.Name, "lat")
	t := newTracker(n)
	stop, err := s.work(pctx, q, cfg.W, t.handle)
	if err != nil {
		return LatenessRun{}, nil, err
	}
	defer stop(pctx)
	time.Sleep(300 * time.Millisecond) // let the workers settle on the empty queue

	d, err := pacedPublish(pctx, s, q, t, n, cfg.Rate, cfg.Publishers, cfg.BodySize, cfg.DelayMin, cfg.DelayMax)
	if err != nil {
		return LatenessRun{}, nil, fmt.Errorf("publish: %w", err)
	}
	wctx, wcancel := context.WithTimeout(pctx, timeout)
	defer wcancel()
	select {
	case <-t.done:
	case <-wctx.Done():
	}
	samples := t.latenessMs()
	r := LatenessRun{
		Summary:     summarize(samples),
		Rate:        F(rate(n, d)),
		Lost:        n - len(samples),
		Redelivered: t.total.Load() - int64(len(samples)),
	}
	return r, samples, nil
}

// pacedPublish publishes n timers at rate per second from p publishers, one
// timer per call, each due a random delay after the moment it is
// published. It returns how long publishing took.
func pacedPublish(ctx context.Context, s system, q string, t *tracker, n, rate, p, size int, dmin, dmax time.Duration) (time.Duration, error) {
	items := make(chan int, n)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range items {
				delay := dmin
				if dmax > dmin {
					delay += rand.N(dmax - dmin)
				}
				due := time.Now().Add(delay)
				if err := s.publish(ctx, q, []timer{{due: due, body: t.body(due, i, size)}}, 1); err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		}()
	}
	start := time.Now()
	feedPaced(ctx, items, n, rate)
	wg.Wait()
	return time.Since(start), firstErr
}

// feedPaced sends 0..n-1 to items at rate per second (in bursts that
// catch up when the sender falls behind) and closes it.
func feedPaced(ctx context.Context, items chan<- int, n, rate int) {
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < n && ctx.Err() == nil; {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		upto := min(n, int(time.Since(start)/interval)+1)
		for ; i < upto; i++ {
			items <- i
		}
	}
	close(items)
}

// IdleResult is the lateness of the first timer on a queue that was idle.
type IdleResult struct {
	System string `json:"system"`
	// Samples are fire minus due, ms, one per idle queue (NaN: not
	// delivered within 20s).
	Samples []F    `json:"samples_ms"`
	Median  F      `json:"median_ms"`
	Max     F      `json:"max_ms"`
	Err     string `json:"error,omitempty"`
}

// idle starts workers on Runs fresh queues per system, leaves them idle for
// cfg.Idle, then publishes one timer per queue, due IdleDelay later (queue
// k one second after queue k-1), every system at the same instants.
func (b *bench) idle(ctx context.Context, specs []sysSpec) {
	cfg := b.cfg
	reps := cfg.Runs
	b.logf("== idle: %d queues per system idle for %s, then one timer due in %s", reps, cfg.Idle, cfg.IdleDelay)
	type q struct {
		name string
		t    *tracker
		stop func(context.Context)
	}
	type st struct {
		spec sysSpec
		sys  system
		qs   []*q
		res  *IdleResult
	}
	var all []*st
	for _, spec := range specs {
		sys := b.open(spec)
		if sys == nil {
			continue
		}
		s := &st{spec: spec, sys: sys, res: &IdleResult{System: spec.Name}}
		if err := reset(ctx, sys); err != nil {
			s.res.Err = err.Error()
		}
		for range reps {
			if s.res.Err != "" {
				break
			}
			qq := &q{name: queueName(spec.Name, "idle"), t: newTracker(1)}
			stop, err := sys.work(ctx, qq.name, cfg.W, qq.t.handle)
			if err != nil {
				s.res.Err = err.Error()
				b.errorf("idle %s: %v", spec.Name, err)
				break
			}
			qq.stop = stop
			s.qs = append(s.qs, qq)
		}
		all = append(all, s)
	}
	defer func() {
		var wg sync.WaitGroup
		for _, s := range all {
			for _, qq := range s.qs {
				wg.Add(1)
				go func() { defer wg.Done(); qq.stop(context.Background()) }()
			}
		}
		wg.Wait()
		for _, s := range all {
			s.sys.close()
		}
	}()
	select {
	case <-time.After(cfg.Idle):
	case <-ctx.Done():
		return
	}
	for k := range reps {
		if k > 0 {
			time.Sleep(time.Second)
		}
		var wg sync.WaitGroup
		for _, s := range all {
			if k >= len(s.qs) {
				continue
			}
			qq := s.qs[k]
			wg.Add(1)
			go func() {
				defer wg.Done()
				due := time.Now().Add(cfg.IdleDelay)
				if err := s.sys.publish(ctx, qq.name, []timer{{due: due, body: qq.t.body(due, 0, cfg.BodySize)}}, 1); err != nil {
					b.errorf("idle %s publish: %v", s.spec.Name, err)
				}
			}()
		}
		wg.Wait()
	}
	deadline := time.After(20 * time.Second)
	for _, s := range all {
		for _, qq := range s.qs {
			select {
			case <-qq.t.done:
			case <-deadline:
			case <-ctx.Done():
			}
		}
	}
	for _, s := range all {
		for _, qq := range s.qs {
			v := nan
			if qq.t.unique.Load() == 1 {
				v = F(float64(qq.t.late[0]) / 1e6)
			}
			s.res.Samples = append(s.res.Samples, v)
		}
		s.res.Median = F(median(fs(s.res.Samples)))
		s.res.Max = nan
		for _, v := range s.res.Samples {
			if float64(s.res.Max) != float64(s.res.Max) || v > s.res.Max {
				s.res.Max = v
			}
		}
		b.logf("idle %-14s: first timer late by %v ms", s.spec.Name, s.res.Samples)
		b.rep.Idle = append(b.rep.Idle, *s.res)
	}
}
