package harness

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ThroughputRun is one run of the throughput scenario for one system.
// Rates are timers per second; RT* are client round trips per timer; Cmd*
// are Redis commands per timer as INFO commandstats counts them (commands
// run inside scripts included; NaN for PostgreSQL systems).
type ThroughputRun struct {
	PublishSingle F   `json:"publish_single"`
	PublishBatch  F   `json:"publish_batch"`
	Drain         []F `json:"drain"`
	E2E           F   `json:"e2e"`

	RTPublishSingle  F      `json:"rt_publish_single"`
	RTPublishBatch   F      `json:"rt_publish_batch"`
	RTWork           F      `json:"rt_work"`
	CmdPublishSingle F      `json:"cmd_publish_single"`
	CmdPublishBatch  F      `json:"cmd_publish_batch"`
	CmdWork          F      `json:"cmd_work"`
	CmdWorkTop       string `json:"cmd_work_top"`
	// RedisCPU* are Redis server CPU (user+sys) microseconds per timer,
	// from INFO cpu; NaN for PostgreSQL systems.
	RedisCPUPublishBatch F      `json:"redis_cpu_us_publish_batch"`
	RedisCPUWork         F      `json:"redis_cpu_us_work"`
	CmdPublishTop        string `json:"cmd_publish_top"`
	Redelivered          int64  `json:"redelivered"`
}

// ThroughputResult holds a system's runs and their medians.
type ThroughputResult struct {
	System string          `json:"system"`
	N      int             `json:"n"`
	Runs   []ThroughputRun `json:"runs"`
	Median ThroughputRun   `json:"median"`
	Err    string          `json:"error,omitempty"`
}

// meter snapshots round trips and commandstats.
type meter struct {
	b    *bench
	s    system
	spec sysSpec
	rt   int64
	cs   cmdStats
	cpu  float64 // Redis used_cpu_user+sys, seconds
}

func (b *bench) meter(ctx context.Context, s system, spec sysSpec) meter {
	m := meter{b: b, s: s, spec: spec, rt: s.roundTrips()}
	if spec.Store == "redis" {
		m.cs, _ = readCmdStats(ctx, b.admin)
		m.cpu = redisCPU(ctx, b.admin)
	}
	return m
}

// redisCPU returns the Redis server's used_cpu_user + used_cpu_sys, in
// seconds (NaN if unknown).
func redisCPU(ctx context.Context, c redis.UniversalClient) float64 {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return math.NaN()
	}
	u, err1 := strconv.ParseFloat(infoField(info, "used_cpu_user"), 64)
	s, err2 := strconv.ParseFloat(infoField(info, "used_cpu_sys"), 64)
	if err1 != nil || err2 != nil {
		return math.NaN()
	}
	return u + s
}

// cpuPer returns Redis CPU microseconds per timer since the snapshot.
func (m meter) cpuPer(ctx context.Context, n int) F {
	if m.cs == nil {
		return nan
	}
	return F((redisCPU(ctx, m.b.admin) - m.cpu) * 1e6 / float64(n))
}

// per returns round trips and commands per timer since the snapshot,
// leaving out the pendingCalls pending checks the harness made on queue:
// their cost is measured by repeating them now, on the same (empty) queue.
func (m meter) per(ctx context.Context, n int, queue string, pendingCalls int) (rt, cmds F, top string) {
	rt = F(float64(m.s.roundTrips()-m.rt) / float64(n))
	cmds = nan
	if m.cs == nil {
		return rt, cmds, ""
	}
	now, err := readCmdStats(ctx, m.b.admin)
	if err != nil {
		return rt, cmds, ""
	}
	d := now.sub(m.cs)
	if pendingCalls > 0 {
		k := min(pendingCalls, 50)
		for range k {
			_, _ = m.s.pending(ctx, queue)
		}
		if after, err := readCmdStats(ctx, m.b.admin); err == nil {
			for c, v := range after.sub(now) {
				d[c] -= v * int64(pendingCalls) / int64(k)
				if d[c] <= 0 {
					delete(d, c)
				}
			}
		}
	}
	return rt, F(float64(d.total()) / float64(n)), d.top(float64(n), 6)
}

func (b *bench) throughput(ctx context.Context, specs []sysSpec) {
	cfg := b.cfg
	b.logf("== throughput: N=%d (peers %d), W=%d, %d publishers, batch %d, body %d B, %d runs",
		cfg.N, cfg.PeerN, cfg.W, cfg.Publishers, cfg.Batch, cfg.BodySize, cfg.Runs)
	b.rep.Throughput = append(b.rep.Throughput, b.throughputRuns(ctx, "throughput", specs, func(spec sysSpec) int {
		if spec.Family == "asynq" || spec.Family == "river" {
			return cfg.PeerN
		}
		return cfg.N
	})...)
}

// throughputRuns runs throughputRun cfg.Runs times for every system of
// specs, with nFor(spec) timers, and returns the results with their
// medians. label names the scenario in the log.
func (b *bench) throughputRuns(ctx context.Context, label string, specs []sysSpec, nFor func(sysSpec) int) []ThroughputResult {
	cfg := b.cfg
	type st struct {
		spec sysSpec
		sys  system
		res  *ThroughputResult
	}
	var all []*st
	for _, spec := range specs {
		sys := b.open(spec)
		if sys == nil {
			continue
		}
		s := &st{spec: spec, sys: sys, res: &ThroughputResult{System: spec.Name, N: nFor(spec)}}
		all = append(all, s)
	}
	defer func() {
		for _, s := range all {
			s.sys.close()
		}
	}()
	// Runs are interleaved across systems so that slow drifts of the shared
	// machine hit every system alike.
	for run := range cfg.Runs {
		for _, s := range all {
			if s.res.Err != "" || ctx.Err() != nil {
				continue
			}
			r, err := b.throughputRun(ctx, s.spec, s.sys, s.res.N)
			if err != nil {
				s.res.Err = err.Error()
				b.errorf("%s %s run %d: %v", label, s.spec.Name, run+1, err)
				continue
			}
			b.logf("%s %-14s run %d: publish %s/s single, %s/s batch; fire+ack %s/s; e2e %s/s; rt/timer pub %.2f work %.2f; redis cpu us/timer pub %.2f work %.2f",
				label, s.spec.Name, run+1, fmtRate(r.PublishSingle), fmtRate(r.PublishBatch), fmtRate(F(median(fs(r.Drain)))), fmtRate(r.E2E),
				r.RTPublishSingle, r.RTWork, r.RedisCPUPublishBatch, r.RedisCPUWork)
			s.res.Runs = append(s.res.Runs, r)
		}
	}
	var out []ThroughputResult
	for _, s := range all {
		s.res.Median = medianThroughput(s.res.Runs)
		out = append(out, *s.res)
	}
	return out
}

func fs(v []F) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func fmtRate(f F) string {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.2fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func medianThroughput(runs []ThroughputRun) ThroughputRun {
	pick := func(f func(ThroughputRun) F) F {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = float64(f(r))
		}
		return F(median(v))
	}
	var drains []float64
	for _, r := range runs {
		drains = append(drains, fs(r.Drain)...)
	}
	m := ThroughputRun{
		PublishSingle:        pick(func(r ThroughputRun) F { return r.PublishSingle }),
		PublishBatch:         pick(func(r ThroughputRun) F { return r.PublishBatch }),
		Drain:                []F{F(median(drains))},
		E2E:                  pick(func(r ThroughputRun) F { return r.E2E }),
		RTPublishSingle:      pick(func(r ThroughputRun) F { return r.RTPublishSingle }),
		RTPublishBatch:       pick(func(r ThroughputRun) F { return r.RTPublishBatch }),
		RTWork:               pick(func(r ThroughputRun) F { return r.RTWork }),
		CmdPublishSingle:     pick(func(r ThroughputRun) F { return r.CmdPublishSingle }),
		CmdPublishBatch:      pick(func(r ThroughputRun) F { return r.CmdPublishBatch }),
		CmdWork:              pick(func(r ThroughputRun) F { return r.CmdWork }),
		RedisCPUPublishBatch: pick(func(r ThroughputRun) F { return r.RedisCPUPublishBatch }),
		RedisCPUWork:         pick(func(r ThroughputRun) F { return r.RedisCPUWork }),
		Redelivered:          int64(pick(func(r ThroughputRun) F { return F(r.Redelivered) })),
	}
	if len(runs) > 0 {
		m.CmdWorkTop = runs[len(runs)/2].CmdWorkTop
		m.CmdPublishTop = runs[len(runs)/2].CmdPublishTop
	}
	return m
}

// throughputRun measures, on fresh queues: single publish (workers off),
// fire+ack of those timers, batched publish (workers off) and its fire+ack,
// and end to end (workers running while a batched publish goes in).
func (b *bench) throughputRun(ctx context.Context, spec sysSpec, s system, n int) (ThroughputRun, error) {
	cfg := b.cfg
	r := ThroughputRun{PublishSingle: nan, PublishBatch: nan, E2E: nan,
		RTPublishSingle: nan, RTPublishBatch: nan, RTWork: nan,
		CmdPublishSingle: nan, CmdPublishBatch: nan, CmdWork: nan,
		RedisCPUPublishBatch: nan, RedisCPUWork: nan}
	best := 1
	if spec.Batch {
		best = cfg.Batch
	}
	timers := func(t *tracker) []timer {
		ts := make([]timer, n)
		for i := range ts {
			ts[i] = timer{body: t.body(time.Time{}, i, cfg.BodySize)}
		}
		return ts
	}
	// drain starts workers on a published queue and measures fire+ack/s
	// from the first fire to the moment nothing is pending.
	drain := func(pctx context.Context, q string, t *tracker) (F, error) {
		m := b.meter(pctx, s, spec)
		stop, err := s.work(pctx, q, cfg.W, t.handle)
		if err != nil {
			return nan, err
		}
		end, calls, err := waitDone(pctx, s, q, t)
		if err == nil {
			r.RedisCPUWork = m.cpuPer(pctx, n)
			r.RTWork, r.CmdWork, r.CmdWorkTop = m.per(pctx, n, q, calls)
		}
		stop(pctx)
		if err != nil {
			return nan, err
		}
		r.Redelivered += t.total.Load() - int64(t.n)
		first := time.Unix(0, t.first.Load())
		return F(rate(n-1, end.Sub(first))), nil
	}

	// 1. Single publish, then fire+ack.
	{
		pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
		defer cancel()
		if err := reset(pctx, s); err != nil {
			return r, err
		}
		q := queueName(spec.Name, "tp1")
		t := newTracker(n)
		ts := timers(t)
		batch := 1
		if spec.Tuned {
			batch = best // publish is not what this variant measures
		}
		m := b.meter(pctx, s, spec)
		d, err := publishAll(pctx, s, q, ts, batch, cfg.Publishers)
		if err != nil {
			return r, fmt.Errorf("publish: %w", err)
		}
		if !spec.Tuned {
			r.PublishSingle = F(rate(n, d))
			r.RTPublishSingle, r.CmdPublishSingle, r.CmdPublishTop = m.per(pctx, n, q, 0)
		}
		v, err := drain(pctx, q, t)
		if err != nil {
			return r, fmt.Errorf("fire+ack: %w", err)
		}
		r.Drain = append(r.Drain, v)
	}
	// 2. Batched publish, then fire+ack.
	if spec.Batch && !spec.Tuned {
		pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
		defer cancel()
		if err := reset(pctx, s); err != nil {
			return r, err
		}
		q := queueName(spec.Name, "tp2")
		t := newTracker(n)
		ts := timers(t)
		m := b.meter(pctx, s, spec)
		d, err := publishAll(pctx, s, q, ts, cfg.Batch, cfg.Publishers)
		if err != nil {
			return r, fmt.Errorf("batch publish: %w", err)
		}
		r.PublishBatch = F(rate(n, d))
		r.RedisCPUPublishBatch = m.cpuPer(pctx, n)
		r.RTPublishBatch, r.CmdPublishBatch, _ = m.per(pctx, n, q, 0)
		v, err := drain(pctx, q, t)
		if err != nil {
			return r, fmt.Errorf("fire+ack after batch: %w", err)
		}
		r.Drain = append(r.Drain, v)
	}
	// 3. End to end: workers running, publish N due now, until all acked.
	{
		pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
		defer cancel()
		if err := reset(pctx, s); err != nil {
			return r, err
		}
		q := queueName(spec.Name, "tp3")
		t := newTracker(n)
		ts := timers(t)
		stop, err := s.work(pctx, q, cfg.W, t.handle)
		if err != nil {
			return r, err
		}
		time.Sleep(200 * time.Millisecond) // let the workers settle on the empty queue
		start := time.Now()
		if _, err := publishAll(pctx, s, q, ts, best, cfg.Publishers); err != nil {
			stop(pctx)
			return r, fmt.Errorf("e2e publish: %w", err)
		}
		end, _, err := waitDone(pctx, s, q, t)
		stop(pctx)
		if err != nil {
			return r, fmt.Errorf("e2e: %w", err)
		}
		r.E2E = F(rate(n, end.Sub(start)))
	}
	return r, nil
}
