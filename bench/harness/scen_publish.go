package harness

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/ontime-go/ontime/envelope"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// PublishCallers are the numbers of concurrent callers of the publish
// scenario.
var PublishCallers = []int{1, 16, 64}

// PublishRun is one run of the publish scenario for one system: timers/s
// by number of concurrent callers, each publishing one timer per call.
type PublishRun struct {
	Rates map[int]F `json:"rates"`
}

// PublishResult holds a system's publish runs and the median rate per
// number of callers.
type PublishResult struct {
	System string       `json:"system"`
	Runs   []PublishRun `json:"runs"`
	Median map[int]F    `json:"median"`
	Err    string       `json:"error,omitempty"`
}

// publishScenario measures one-by-one publishes (Client.Publish, one timer
// per call, due in an hour so nothing fires) from 1, 16 and 64 concurrent
// callers on each system, each for Config.PublishFor on a fresh store, next to the "-direct" baselines that make one
// store call per timer (what Publish did before it coalesced concurrent
// calls).
func (b *bench) publishScenario(ctx context.Context, specs []sysSpec) {
	cfg := b.cfg
	b.logf("== publish: %s per measurement, callers %v, body %d B, %d runs", cfg.PublishFor, PublishCallers, cfg.BodySize, cfg.Runs)
	all, closeAll := openSystems(b, specs, func(spec sysSpec) *PublishResult { return &PublishResult{System: spec.Name} })
	defer closeAll()
	for run := range cfg.Runs {
		for _, s := range all {
			if s.res.Err != "" || ctx.Err() != nil {
				continue
			}
			r := PublishRun{Rates: map[int]F{}}
			for _, callers := range PublishCallers {
				pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
				v, err := b.publishFor(pctx, s.spec, s.sys, callers)
				cancel()
				if err != nil {
					s.res.Err = err.Error()
					b.errorf("publish %s run %d, %d callers: %v", s.spec.Name, run+1, callers, err)
					break
				}
				r.Rates[callers] = v
			}
			if s.res.Err != "" {
				continue
			}
			b.logf("publish %-22s run %d: %s", s.spec.Name, run+1, fmtPublishRates(r.Rates))
			s.res.Runs = append(s.res.Runs, r)
		}
	}
	for _, s := range all {
		s.res.Median = map[int]F{}
		for _, c := range PublishCallers {
			var v []float64
			for _, r := range s.res.Runs {
				v = append(v, float64(r.Rates[c]))
			}
			s.res.Median[c] = F(median(v))
		}
		b.rep.Publish = append(b.rep.Publish, *s.res)
	}
}

// publishFor publishes one timer per call from callers goroutines for
// Config.PublishFor on a fresh store and returns the rate.
func (b *bench) publishFor(ctx context.Context, spec sysSpec, s system, callers int) (F, error) {
	if err := reset(ctx, s); err != nil {
		return nan, err
	}
	q := queueName(spec.Name, "pub")
	due := time.Now().Add(time.Hour)
	tag := newTracker(1)
	var count atomic.Int64
	errs := make(chan error, callers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := int(count.Add(1))
				if err := s.publish(ctx, q, []timer{{due: due, body: tag.body(due, i, b.cfg.BodySize)}}, 1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	select {
	case <-time.After(b.cfg.PublishFor):
	case err := <-errs:
		close(stop)
		wg.Wait()
		return nan, err
	}
	close(stop)
	wg.Wait()
	d := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return nan, err
	}
	// Calls still under way when the time ran out finished (and counted)
	// before wg.Wait returned; d includes them.
	return F(rate(int(count.Load()), d)), nil
}

func fmtPublishRates(m map[int]F) string {
	out := ""
	for _, c := range PublishCallers {
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("%d callers %s/s", c, fmtRate(m[c]))
	}
	return out
}

// publishBaselineSpecs are the publish scenario's baselines: the same
// stores, one driver Schedule call per published timer (encoded as Publish
// encodes it), which is what Client.Publish did before it coalesced
// concurrent calls.
func publishBaselineSpecs(Config) []sysSpec {
	return []sysSpec{
		{
			Name: "ontime-direct", Family: "baseline", Store: "redis",
			Settings:  "native layout; one driver Schedule call (one script) per timer: Publish before coalescing",
			Scenarios: []string{ScenarioPublish},
			open: func(e *env) (system, error) {
				s, err := openOntime(e, ontimeredis.Native)
				if err != nil {
					return nil, err
				}
				return &directSystem{system: s, drv: func() ontimedriver.Driver { return s.drv }}, nil
			},
		},
		{
			Name: "ontime-embedded-direct", Family: "baseline", Store: "bolt",
			Settings:  "embedded store; one driver Schedule call per timer: Publish before coalescing",
			Scenarios: []string{ScenarioPublish},
			open: func(e *env) (system, error) {
				s, err := openEmbedded(e)
				if err != nil {
					return nil, err
				}
				return &directSystem{system: s, drv: func() ontimedriver.Driver { return s.drv }}, nil
			},
		},
	}
}

// directSystem publishes one timer per driver Schedule call. The
// harness's Clients have no prefix, so the driver's topic is the queue.
type directSystem struct {
	system
	drv func() ontimedriver.Driver // the current driver (reset may replace it)
}

func (s *directSystem) publish(ctx context.Context, queue string, ts []timer, _ int) error {
	for _, t := range ts {
		id := uuid.NewString()
		payload, err := envelope.AppendEncode(make([]byte, 0, 64+len(t.body)+len(id)), id, "", nil, t.body)
		if err != nil {
			return err
		}
		res, err := s.drv().Schedule(ctx, queue, []ontimedriver.NewTimer{{ID: id, At: t.due, Payload: payload}}, ontimedriver.Upsert)
		if err != nil {
			return err
		}
		if res[0].Err != nil {
			return res[0].Err
		}
	}
	return nil
}

func (s *directSystem) reset(ctx context.Context) error { return reset(ctx, s.system) }
