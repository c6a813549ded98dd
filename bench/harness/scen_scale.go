package harness

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// claimer is what the scale scenario needs beyond system: one timed claim
// (and the ack of what it took).
type claimer interface {
	claimOnce(ctx context.Context, queue string, max int) (time.Duration, int, error)
}

// farLoader loads n far-future timers (due far + from.. ms) into a topic
// faster than its publish API can.
type farLoader interface {
	loadFar(ctx context.Context, queue string, from, n int, far time.Time, body []byte) error
}

// ScaleSize is the claim latency with Pending far-future timers in the
// topic.
type ScaleSize struct {
	Pending int `json:"pending"`
	// Claims is how many timed claims took exactly one due timer, in the
	// round reported.
	Claims int `json:"claims"`
	// Claim summarizes the round (of cfg.Runs, each of cfg.ScaleClaims
	// claims) whose p99 is the median of the rounds' p99s: one round's p99
	// is its 20th-slowest claim of 2000, which a neighbour on a shared
	// machine can move by a factor of two.
	Claim LatencySummary `json:"claim_ms"`
	// RoundsP99 are every round's p99, ms.
	RoundsP99 []F `json:"rounds_p99_ms"`
	// LoadRate is the rate at which the far-future timers were loaded,
	// timers/s: ontime's go straight into the topic's keys by a server-side
	// script (ontimeSystem.loadFar), not through the publish API.
	LoadRate F `json:"load_rate"`
	// UsedMemory is Redis used_memory after loading, bytes.
	UsedMemory int64 `json:"used_memory"`
}

// ScaleResult is one system's scale scenario.
type ScaleResult struct {
	System string      `json:"system"`
	Sizes  []ScaleSize `json:"sizes"`
	// Ratio is p99 at the largest size over p99 at the smallest.
	Ratio F      `json:"ratio"`
	Err   string `json:"error,omitempty"`
}

// scale fills one topic per system with far-future timers up to each of
// cfg.ScaleSizes in turn (the topic grows; it is not reloaded) and at each
// size times cfg.ScaleClaims claims, each of which finds exactly one due
// timer published just before it (the trickle) and acks it.
func (b *bench) scale(ctx context.Context, specs []sysSpec) {
	cfg := b.cfg
	b.logf("== scale: claim latency at %v pending far-future timers, %d claims each, body %d B", cfg.ScaleSizes, cfg.ScaleClaims, cfg.BodySize)
	for _, spec := range specs {
		if spec.Family != "ontime" {
			continue // only ontime exposes a claim to time
		}
		sys := b.open(spec)
		if sys == nil {
			continue
		}
		res := b.scaleSystem(ctx, spec, sys)
		sys.close()
		b.rep.Scale = append(b.rep.Scale, res)
		_ = b.admin.FlushAll(ctx).Err() // synchronous: a background free would overlap the next system's claims
	}
}

func (b *bench) scaleSystem(ctx context.Context, spec sysSpec, sys system) ScaleResult {
	cfg := b.cfg
	res := ScaleResult{System: spec.Name, Ratio: nan}
	cl, ok := sys.(claimer)
	if !ok {
		res.Err = "no claim probe"
		return res
	}
	if err := b.admin.FlushAll(ctx).Err(); err != nil {
		res.Err = err.Error()
		return res
	}
	q := queueName(spec.Name, "scale")
	loaded := 0
	far := time.Now().Add(30 * 24 * time.Hour)
	bodyT := newTracker(1)
	for _, size := range b.scaleSizes(spec) {
		if ctx.Err() != nil {
			break
		}
		// Load up to size: straight into the topic's keys when the system
		// can (loadFar), else in chunks of batched publishes so that the
		// timer slice stays small.
		start := time.Now()
		from := loaded
		if fl, ok := sys.(farLoader); ok && size > loaded {
			lctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
			err := fl.loadFar(lctx, q, loaded, size-loaded, far, bodyT.body(far, 0, cfg.BodySize))
			cancel()
			if err != nil {
				res.Err = fmt.Sprintf("load to %d: %v", size, err)
				b.errorf("scale %s: %s", spec.Name, res.Err)
				return res
			}
			loaded = size
		}
		for add := size - loaded; add > 0 && ctx.Err() == nil; add = size - loaded {
			chunk := min(add, 200_000)
			ts := make([]timer, chunk)
			for i := range ts {
				// Distinct due times, one millisecond apart, all far out.
				due := far.Add(time.Duration(loaded+i) * time.Millisecond)
				ts[i] = timer{due: due, body: bodyT.body(due, 0, cfg.BodySize)}
			}
			pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
			_, err := publishAll(pctx, sys, q, ts, 500, 4)
			cancel()
			if err != nil {
				res.Err = fmt.Sprintf("load to %d: %v", size, err)
				b.errorf("scale %s: %s", spec.Name, res.Err)
				return res
			}
			loaded += chunk
		}
		loadRate := nan
		if loaded > from {
			loadRate = F(rate(loaded-from, time.Since(start)))
		}
		info, _ := b.admin.Info(ctx, "memory").Result()
		used, _ := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)

		// The trickle: one due timer, then a timed claim that takes it;
		// cfg.Runs rounds of cfg.ScaleClaims.
		var rounds []LatencySummary
		for range max(cfg.Runs, 1) {
			lat, err := b.scaleRound(ctx, sys, cl, q)
			if err != nil {
				res.Err = err.Error()
				return res
			}
			rounds = append(rounds, summarize(lat))
		}
		ss := ScaleSize{Pending: size, LoadRate: loadRate, UsedMemory: used}
		ss.Claim = medianRound(rounds)
		ss.Claims = ss.Claim.Count
		for _, r := range rounds {
			ss.RoundsP99 = append(ss.RoundsP99, r.P99)
		}
		b.logf("scale %-14s %9d pending: claim p50 %.3fms p99 %.3fms max %.2fms (%d claims; p99 of the rounds %v ms); loaded at %s/s; used_memory %d MB",
			spec.Name, size, ss.Claim.P50, ss.Claim.P99, ss.Claim.Max, ss.Claims, ss.RoundsP99, fmtRate(loadRate), used>>20)
		res.Sizes = append(res.Sizes, ss)
	}
	if len(res.Sizes) >= 2 {
		lo, hi := res.Sizes[0].Claim.P99, res.Sizes[len(res.Sizes)-1].Claim.P99
		res.Ratio = F(float64(hi) / float64(lo))
	}
	return res
}

// scaleRound publishes one due timer and times one claim that takes it,
// cfg.ScaleClaims times; it returns the latencies (ms) of the claims that
// took exactly one timer.
func (b *bench) scaleRound(ctx context.Context, sys system, cl claimer, q string) ([]float64, error) {
	cfg := b.cfg
	t := newTracker(cfg.ScaleClaims)
	lat := make([]float64, 0, cfg.ScaleClaims)
	for i := range cfg.ScaleClaims {
		if ctx.Err() != nil {
			break
		}
		due := time.Now().Add(-time.Millisecond)
		if err := sys.publish(ctx, q, []timer{{due: due, body: t.body(due, i, cfg.BodySize)}}, 1); err != nil {
			return nil, fmt.Errorf("trickle publish: %w", err)
		}
		d, n, err := cl.claimOnce(ctx, q, 16)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		if n == 1 {
			lat = append(lat, ms(d))
		}
	}
	return lat, nil
}

// medianRound is the round whose p99 is the median of the rounds' p99s (the
// lower middle one of an even count).
func medianRound(rounds []LatencySummary) LatencySummary {
	if len(rounds) == 0 {
		return summarize(nil)
	}
	s := slices.Clone(rounds)
	slices.SortFunc(s, func(a, b LatencySummary) int { return cmp.Compare(a.P99, b.P99) })
	return s[(len(s)-1)/2]
}

// scaleSizes are cfg.ScaleSizes, for the compatible layout only those up to
// cfg.ScaleCompatMax (at least the smallest).
func (b *bench) scaleSizes(spec sysSpec) []int {
	sizes := b.cfg.ScaleSizes
	if spec.Name != "ontime-compat" || b.cfg.ScaleCompatMax <= 0 || len(sizes) == 0 {
		return sizes
	}
	var out []int
	for _, s := range sizes {
		if s <= b.cfg.ScaleCompatMax {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = sizes[:1]
	}
	return out
}
