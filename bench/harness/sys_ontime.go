package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
	"github.com/ontime-go/ontime/ontimeprom"
)

// ontimeSystem drives ontime on the harness's Redis with the ontimeredis
// driver, in the native or the faststream-compatible layout: PublishBatch
// (or Publish) with At, a Worker with one topic of MaxConcurrency = W.
type ontimeSystem struct {
	rt     roundTrips
	rdb    *redis.Client
	admin  *redis.Client // uncounted: pending checks
	drv    *ontimeredis.Driver
	adrv   *ontimeredis.Driver
	client *ontime.Client
	layout ontimeredis.Layout
	prefix string
	lease  time.Duration // 0: the default
	hooks  []any         // the Client's
}

// workerWatcher is a hook that also watches workers' health and counts
// the store (ontimeprom.Metrics).
type workerWatcher interface {
	WatchWorker(ontimeprom.HealthReporter) func()
	RunSampler(context.Context, ontimedriver.Driver, *ontimeprom.SampleOptions)
}

func (s *ontimeSystem) setLease(d time.Duration) { s.lease = d }

const ontimeBenchPrefix = "bench:"

func ontimeSpecs(Config) []sysSpec {
	open := func(layout ontimeredis.Layout) func(e *env) (system, error) {
		return func(e *env) (system, error) {
			return openOntime(e, layout)
		}
	}
	return []sysSpec{
		{
			Name: "ontime", Family: "ontime", Store: "redis", Batch: true,
			Settings:  "native layout; MaxConcurrency = W, ClaimBatch 256, PollInterval 1s (defaults, wake-ups on); go-redis PoolSize 64",
			Scenarios: append(slices.Clone(originalScenarios), ScenarioPublish),
			open:      open(ontimeredis.Native),
		},
		{
			Name: "ontime-compat", Family: "ontime", Store: "redis", Batch: true,
			Settings: "faststream-compatible layout; otherwise as ontime",
			open:     open(ontimeredis.Compatible),
		},
	}
}

func openOntime(e *env, layout ontimeredis.Layout) (*ontimeSystem, error) {
	return openOntimeWith(e, layout, nil)
}

// openOntimeWith opens ontime with hooks on its Client (and, for a hook
// that watches workers, its Worker: see work).
func openOntimeWith(e *env, layout ontimeredis.Layout, hooks []any) (*ontimeSystem, error) {
	s := &ontimeSystem{layout: layout, prefix: ontimeBenchPrefix}
	s.rdb = e.newRedis(&s.rt, 64)
	s.admin = e.newRedis(nil, 4)
	opts := &ontimeredis.Options{Prefix: s.prefix, Layout: layout, Logger: quietSlog()}
	var err error
	if s.drv, err = ontimeredis.New(s.rdb, opts); err != nil {
		s.close()
		return nil, err
	}
	if s.adrv, err = ontimeredis.New(s.admin, opts); err != nil {
		s.close()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.drv.Ping(ctx); err != nil {
		s.close()
		return nil, err
	}
	if err := s.adrv.Ping(ctx); err != nil {
		s.close()
		return nil, err
	}
	s.hooks = hooks
	if s.client, err = ontime.NewClient(s.drv, &ontime.Config{Logger: quietSlog(), Hooks: hooks}); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *ontimeSystem) publish(ctx context.Context, queue string, ts []timer, batch int) error {
	return clientPublish(ctx, s.client, queue, ts, batch)
}

func (s *ontimeSystem) work(_ context.Context, queue string, w int, h func([]byte)) (func(context.Context), error) {
	wk := ontime.NewWorker(s.client, &ontime.WorkerConfig{Logger: quietSlog(), ShutdownTimeout: 10 * time.Second})
	err := ontime.Handle(wk, queue, func(_ context.Context, m *ontime.Message[[]byte]) error {
		h(m.Body)
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: w, Lease: s.lease})
	if err != nil {
		return nil, err
	}
	var unwatch []func()
	sctx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{}, len(s.hooks))
	for _, h := range s.hooks {
		if ww, ok := h.(workerWatcher); ok {
			unwatch = append(unwatch, ww.WatchWorker(wk))
			go func() { defer func() { sampled <- struct{}{} }(); ww.RunSampler(sctx, s.drv, nil) }()
		}
	}
	done := make(chan error, 1)
	go func() { done <- wk.Run(context.Background()) }()
	return func(ctx context.Context) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = wk.Stop(sctx)
		<-done
		stopSampling()
		for range unwatch {
			<-sampled
		}
		for _, u := range unwatch {
			u()
		}
	}, nil
}

func (s *ontimeSystem) pending(ctx context.Context, queue string) (int64, error) {
	c, err := s.adrv.Count(ctx, queue)
	if err != nil {
		return 0, err
	}
	return c.Scheduled + c.Leased, nil
}

func (s *ontimeSystem) roundTrips() int64 { return s.rt.load() }

// claimOnce is the scale scenario's probe: one Claim of up to max timers
// and one Settle acking what it took. It returns the claim's latency.
func (s *ontimeSystem) claimOnce(ctx context.Context, queue string, max int) (time.Duration, int, error) {
	start := time.Now()
	res, err := s.drv.Claim(ctx, queue, max, 30*time.Second)
	d := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if len(res.Timers) > 0 {
		ops := make([]ontimedriver.Settlement, len(res.Timers))
		for i, t := range res.Timers {
			ops[i] = ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: t.ID, Token: t.Token}, Kind: ontimedriver.Ack}
		}
		if _, err := s.drv.Settle(ctx, queue, ops); err != nil {
			return d, 0, fmt.Errorf("settle: %w", err)
		}
	}
	return d, len(res.Timers), nil
}

func (s *ontimeSystem) close() {
	if s.drv != nil {
		_ = s.drv.Close()
	}
	if s.adrv != nil {
		_ = s.adrv.Close()
	}
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
	if s.admin != nil {
		_ = s.admin.Close()
	}
}

// loadFarScript writes ARGV[4] timers straight into a topic's two keys:
// ids ARGV[1] .. zero-padded index (from ARGV[3]), due ARGV[5] + index ms,
// value ARGV[6] (native: a record "0,<due>,0:" + envelope; compatible: the
// envelope, score in float seconds as the compatible scripts write it).
// ARGV[2] is "n" (native) or "c" (compatible).
const loadFarScript = `
local pre, layout, from, n, base, env = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local z, h = {}, {}
local function flush()
  if #z > 0 then
    redis.call('ZADD', KEYS[1], unpack(z))
    redis.call('HSET', KEYS[2], unpack(h))
    z, h = {}, {}
  end
end
for i = from, from + n - 1 do
  local id = pre .. string.format('%012d', i)
  local due = base + i
  if layout == 'n' then
    z[#z + 1] = due
    h[#h + 1] = id
    h[#h + 1] = '0,' .. string.format('%.0f', due) .. ',0:' .. env
  else
    local s = math.floor(due / 1000)
    z[#z + 1] = string.format('%.0f.%06d', s, (due - s * 1000) * 1000)
    h[#h + 1] = id
    h[#h + 1] = env
  end
  z[#z + 1] = id
  if #z >= 2000 then
    flush()
  end
end
flush()
return n
`

// loadFar is the scale scenario's fast load: it publishes one timer due
// at far through the driver, reads back the envelope the driver stored,
// and writes n-1 more timers with the same envelope straight into the
// topic's due sorted set and msg hash (the layout's exact format: see
// ontimeredis's doc.go and lua/*.lua), due one millisecond apart, in
// server-side batches. Ids have the length of the driver's UUIDs. The
// far-future timers are never claimed, so only their number, keys and
// sizes matter to the claims timed next to them.
func (s *ontimeSystem) loadFar(ctx context.Context, queue string, from, n int, far time.Time, body []byte) error {
	if n <= 0 {
		return nil
	}
	due := far.Add(time.Duration(from) * time.Millisecond)
	id, err := s.client.Publish(ctx, queue, body, ontime.At(due))
	if err != nil {
		return err
	}
	var dueKey, msgKey, layout string
	if s.layout == ontimeredis.Compatible {
		dueKey, msgKey, layout = "timers_timeline:"+queue, "timers_payloads:"+queue, "c"
	} else {
		dueKey, msgKey, layout = s.prefix+"{"+queue+"}:due", s.prefix+"{"+queue+"}:msg", "n"
	}
	val, err := s.admin.HGet(ctx, msgKey, id).Result()
	if err != nil {
		return fmt.Errorf("template timer %s not in %s: %w", id, msgKey, err)
	}
	env := val
	if layout == "n" {
		// <attempt>,<dueMs>,<errLen>:<err><envelope>
		var attempt, errLen int
		var dueMs int64
		colon := strings.IndexByte(val, ':')
		if colon < 0 {
			return fmt.Errorf("template record %q: no header", val)
		}
		if _, err := fmt.Sscanf(val[:colon], "%d,%d,%d", &attempt, &dueMs, &errLen); err != nil {
			return fmt.Errorf("template record header %q: %w", val[:colon], err)
		}
		if dueMs != due.UnixMilli() && dueMs != due.UnixMilli()+1 {
			return fmt.Errorf("template record due %d, published %d", dueMs, due.UnixMilli())
		}
		env = val[colon+1+errLen:]
	}
	if len(id) <= 12 {
		return fmt.Errorf("template id %q too short", id)
	}
	pre := id[:len(id)-12]
	base := due.UnixMilli() - int64(from)
	const chunk = 100_000
	for lo := from + 1; lo < from+n; lo += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		m := min(chunk, from+n-lo)
		if err := s.admin.Eval(ctx, loadFarScript, []string{dueKey, msgKey}, pre, layout, lo, m, base, env).Err(); err != nil {
			return err
		}
	}
	return nil
}
