package harness

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// MemoryResult is Redis used_memory growth per pending timer.
type MemoryResult struct {
	System   string `json:"system"`
	BodySize int    `json:"body_size"`
	Timers   int    `json:"timers"`
	// Runs are bytes per timer; Median their median.
	Runs   []F    `json:"runs"`
	Median F      `json:"median"`
	Err    string `json:"error,omitempty"`
}

var memoryBodies = []int{100, 1024}

// memory measures, for every Redis system and body size, INFO memory
// used_memory after publishing cfg.MemoryTimers timers due in a day minus
// used_memory before, on an emptied Redis, divided by the number of
// timers.
func (b *bench) memory(ctx context.Context, specs []sysSpec) {
	cfg := b.cfg
	b.logf("== memory: %d pending timers per measurement, bodies %v bytes, %d runs", cfg.MemoryTimers, memoryBodies, cfg.Runs)
	for _, spec := range specs {
		if spec.Store != "redis" || spec.Tuned {
			continue
		}
		sys := b.open(spec)
		if sys == nil {
			continue
		}
		for _, size := range memoryBodies {
			res := MemoryResult{System: spec.Name, BodySize: size, Timers: cfg.MemoryTimers}
			for run := range cfg.Runs {
				v, err := b.memoryRun(ctx, spec, sys, size)
				if err != nil {
					res.Err = err.Error()
					b.errorf("memory %s %dB run %d: %v", spec.Name, size, run+1, err)
					break
				}
				res.Runs = append(res.Runs, F(v))
			}
			res.Median = F(median(fs(res.Runs)))
			b.logf("memory %-14s body %4d B: %.0f bytes/timer", spec.Name, size, res.Median)
			b.rep.Memory = append(b.rep.Memory, res)
		}
		sys.close()
	}
	_ = b.admin.FlushAll(ctx).Err()
}

func (b *bench) usedMemory(ctx context.Context) (int64, error) {
	info, err := b.admin.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
}

func (b *bench) memoryRun(ctx context.Context, spec sysSpec, s system, size int) (float64, error) {
	cfg := b.cfg
	pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	if err := b.admin.FlushAll(pctx).Err(); err != nil {
		return 0, err
	}
	q := queueName(spec.Name, "mem")
	t := newTracker(cfg.MemoryTimers)
	due := time.Now().Add(24 * time.Hour)
	ts := make([]timer, cfg.MemoryTimers)
	for i := range ts {
		ts[i] = timer{due: due, body: t.body(due, i, size)}
	}
	before, err := b.usedMemory(pctx)
	if err != nil {
		return 0, err
	}
	batch := 1
	if spec.Batch {
		batch = cfg.Batch
	}
	if _, err := publishAll(pctx, s, q, ts, batch, cfg.Publishers); err != nil {
		return 0, err
	}
	after, err := b.usedMemory(pctx)
	if err != nil {
		return 0, err
	}
	n, err := s.pending(pctx, q)
	if err != nil {
		return 0, err
	}
	if n != int64(cfg.MemoryTimers) {
		return 0, fmt.Errorf("%d timers pending after publishing %d", n, cfg.MemoryTimers)
	}
	return float64(after-before) / float64(cfg.MemoryTimers), nil
}
