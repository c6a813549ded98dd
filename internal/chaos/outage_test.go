//go:build linux

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
)

// outageParams sizes TestRedisRestart and TestRedisPause; see
// params_*_test.go.
type outageParams struct {
	workers int           // in-process workers, each with its own connection pool
	conc    int           // MaxConcurrency
	lease   time.Duration // Lease
	work    time.Duration // handlers sleep a random time below this
	cycles  int           // how many outages
	outage  time.Duration // how long each lasts
	between time.Duration // load before, between and after the outages
}

// TestRedisRestart kills redis-server (SIGKILL; appendonly yes, appendfsync
// always) while a publisher publishes and workers deliver, restarts it on
// the same port and data directory, and checks that every timer whose
// Publish returned nil is delivered, that Publish failed during the outage
// (never a false success), and that every worker went unhealthy and came
// back on its own, logging each change of state once, not per attempt.
func TestRedisRestart(t *testing.T) {
	p := restartDefaults
	srv := redistest.StartServer(t, redistest.AppendOnly())
	runOutage(t, p, "restart", srv, func() { srv.Kill() }, func() { srv.Restart() })
}

// TestRedisPause stops redis-server with SIGSTOP for longer than the lease
// and resumes it (SIGCONT): leases held across the pause have expired by
// the store's clock when it resumes, so timers are delivered again. No
// timer is lost; duplicates are counted. Every worker turns unhealthy
// during the pause (its calls time out) and back, logging each change once.
func TestRedisPause(t *testing.T) {
	p := pauseDefaults
	srv := redistest.StartServer(t)
	runOutage(t, p, "pause", srv, srv.Pause, srv.Resume)
}

// pubRecord is one Publish call.
type pubRecord struct {
	id         string
	start, end time.Time
	err        error
}

// delivery is one handler call in the test process.
type delivery struct {
	id      string
	attempt int
	worker  int
}

// healthLog records a worker's health transitions as sampled.
type healthLog struct {
	sawDown, sawUpAfterDown bool
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// transitions counts a worker's log records of its health changes: the
// worker logs "store unreachable" when it turns unhealthy and "store
// reachable again" when it recovers, once per change, never per failed
// attempt.
type transitions struct {
	down, up atomic.Int64
}

// countingHandler is a slog.Handler that counts the health transitions
// logged through it and passes every record on.
type countingHandler struct {
	slog.Handler
	n *transitions
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	switch {
	case strings.Contains(r.Message, "store unreachable"):
		h.n.down.Add(1)
	case strings.Contains(r.Message, "store reachable again"):
		h.n.up.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return countingHandler{h.Handler.WithAttrs(as), h.n}
}

func (h countingHandler) WithGroup(name string) slog.Handler {
	return countingHandler{h.Handler.WithGroup(name), h.n}
}

func runOutage(t *testing.T, p outageParams, kind string, srv *redistest.Server, down, up func()) {
	const pollInterval = 200 * time.Millisecond
	ctx := t.Context()
	prefix := redistest.Prefix(t)
	const topic = "outage"
	pubRDB := readmeClient(t, srv.Addr)
	var logs syncBuffer
	pub, _ := newStoreClient(t, pubRDB, prefix, slog.New(slog.NewTextHandler(&logs, nil)).With("publisher", true))

	// Workers, in process so that Health can be watched.
	var (
		dmu        sync.Mutex
		deliveries []delivery
	)
	workers := make([]*ontime.Worker, p.workers)
	trans := make([]transitions, p.workers)
	runErr := make(chan error, p.workers)
	for i := range workers {
		log := slog.New(countingHandler{slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}), &trans[i]}).With("worker", i)
		c, _ := newStoreClient(t, readmeClient(t, srv.Addr), prefix, log)
		w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: log, ShutdownTimeout: 5 * time.Second})
		err := ontime.Handle(w, topic, func(ctx context.Context, m *ontime.Message[[]byte]) error {
			dmu.Lock()
			deliveries = append(deliveries, delivery{m.ID, m.Attempt, i})
			dmu.Unlock()
			if p.work > 0 {
				time.Sleep(rand.N(p.work))
			}
			return nil
		}, &ontime.TopicOptions{MaxConcurrency: p.conc, Lease: p.lease, PollInterval: pollInterval})
		if err != nil {
			t.Fatal(err)
		}
		workers[i] = w
		go func() { runErr <- w.Run(context.WithoutCancel(ctx)) }()
	}
	stopped := false
	stopWorkers := func() {
		if stopped {
			return
		}
		stopped = true
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		for _, w := range workers {
			if err := w.Stop(sctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
		}
		for range workers {
			if err := <-runErr; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	t.Cleanup(stopWorkers)
	defer func() {
		if t.Failed() {
			s := logs.String()
			if len(s) > 20000 {
				s = "...\n" + s[len(s)-20000:]
			}
			t.Logf("worker logs:\n%s", s)
		}
	}()

	// Health sampler.
	health := make([]healthLog, len(workers))
	sampleDone := make(chan struct{})
	stopSample := make(chan struct{})
	var samplePasses atomic.Int64
	go func() {
		defer close(sampleDone)
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopSample:
				return
			case <-tk.C:
			}
			for i, w := range workers {
				h := w.Health()
				if !h.Healthy {
					health[i].sawDown = true
				} else if health[i].sawDown {
					health[i].sawUpAfterDown = true
				}
			}
			samplePasses.Add(1)
		}
	}()

	// Publisher: one timer per call, due within 300ms, until told to stop.
	var pubs []pubRecord
	stopPub := make(chan struct{})
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for n := 0; ; n++ {
			select {
			case <-stopPub:
				return
			default:
			}
			id := fmt.Sprintf("p%06d", n)
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			r := pubRecord{id: id, start: time.Now()}
			_, r.err = pub.Publish(pctx, topic, []byte("x"), ontime.WithID(id), ontime.In(time.Duration(rand.Int64N(int64(300*time.Millisecond)))))
			r.end = time.Now()
			cancel()
			pubs = append(pubs, r)
			time.Sleep(time.Millisecond)
		}
	}()

	// The outages.
	type window struct{ from, to time.Time }
	var windows []window
	time.Sleep(p.between)
	for range p.cycles {
		down()
		from := time.Now()
		time.Sleep(p.outage)
		to := time.Now()
		up()
		windows = append(windows, window{from, to})
		time.Sleep(p.between)
	}
	close(stopPub)
	<-pubDone

	counts := waitEmpty(t, pub, topic, 60*time.Second)
	// The last health transitions sampled: every worker healthy again (a
	// worker whose back-off still runs may come back after the store
	// emptied; one that does not is reported below), then two passes of
	// the sampler.
	_ = wait.Until(10*time.Second, func() bool {
		for _, w := range workers {
			if !w.Health().Healthy {
				return false
			}
		}
		return true
	})
	passes := samplePasses.Load()
	wait.For(t, 10*time.Second, func() bool { return samplePasses.Load() >= passes+2 }, "two passes of the health sampler")
	close(stopSample)
	<-sampleDone
	stopWorkers()
	if counts.Dead != 0 {
		t.Errorf("%d timers were dead-lettered", counts.Dead)
	}

	// Publishes. go-redis retries a failed command (redialling) within the
	// caller's context, so a Publish issued during the outage either fails
	// when its context ends or succeeds after the server is back. What must
	// never happen is a success while no server could have answered: a call
	// that returned nil well inside an outage window. (The real proof of
	// "no false success" is lost=0 below: every nil-returning Publish was
	// durably written.)
	const margin = 100 * time.Millisecond // scheduling slack for the end stamp
	okIDs := map[string]bool{}
	failed, failedInOutage := 0, 0
	for _, r := range pubs {
		if r.err == nil {
			okIDs[r.id] = true
		} else {
			failed++
		}
		for _, w := range windows {
			if r.err != nil && r.end.After(w.from) && r.start.Before(w.to) {
				failedInOutage++
			}
			if r.err == nil && r.end.After(w.from.Add(margin)) && r.end.Before(w.to) {
				t.Errorf("Publish %s returned nil at %v, while redis-server was down (%s from %v to %v)", r.id, r.end, kind, w.from, w.to)
			}
		}
	}
	if failedInOutage < len(windows) {
		t.Errorf("only %d Publish calls failed across %d outages", failedInOutage, len(windows))
	}

	// Deliveries.
	type claim struct {
		id      string
		attempt int
	}
	dmu.Lock()
	ds := append([]delivery(nil), deliveries...)
	dmu.Unlock()
	byID := map[string]int{}
	seen := map[claim]bool{}
	for _, d := range ds {
		byID[d.id]++
		c := claim{d.id, d.attempt}
		if seen[c] {
			t.Errorf("timer %s attempt %d was delivered twice: two workers held one lease", d.id, d.attempt)
		}
		seen[c] = true
	}
	lost, dup, uncertainDelivered := 0, 0, 0
	for id := range okIDs {
		if byID[id] == 0 {
			lost++
			if lost <= 10 {
				t.Errorf("timer %s was published (Publish returned nil) but never delivered", id)
			}
		}
	}
	for id, n := range byID {
		dup += n - 1
		if !okIDs[id] {
			uncertainDelivered++
		}
	}

	// Health: every worker noticed the outage and recovered on its own. A
	// worker notices when a store call fails, and a call made during an
	// outage fails only when its timeout ends, killed server or paused:
	// a paused one does not answer, and a refused connection is retried by
	// go-redis (5 dials 100 ms apart per try, 4 tries), which outlasts the
	// call. The claim loop calls Claim at least every PollInterval (200 ms;
	// its handlers take under 50 ms, so it never waits long for a slot),
	// and each Claim or Settle is bounded by storeCallTimeout (claimloop.go:
	// Lease/3 clamped to 2 s..5 s), so an outage longer than the sum, plus
	// 300 ms for scheduling, turns every worker unhealthy. A shorter one
	// may look like a slow store (calls wait, then succeed) and is not
	// checked; params_*_test.go make the outages long enough.
	callTimeout := min(max(p.lease/3, 2*time.Second), 5*time.Second)
	mustGoDown := p.outage >= callTimeout+pollInterval+300*time.Millisecond
	sawDown := 0
	for i, h := range health {
		if h.sawDown {
			sawDown++
		}
		if mustGoDown && (!h.sawDown || !h.sawUpAfterDown) {
			t.Errorf("worker %d: health went down %v, came back %v", i, h.sawDown, h.sawUpAfterDown)
		}
		if h.sawDown && !h.sawUpAfterDown {
			t.Errorf("worker %d went unhealthy and did not come back", i)
		}
		if now := workers[i].Health(); !now.Healthy {
			t.Errorf("worker %d is unhealthy at the end: %+v", i, now)
		}
	}
	// The log: each worker logged its transitions once per change of
	// state, not once per failed attempt (a worker retries its claims,
	// settles and extends many times during an outage, backing off from
	// 50 ms). Every down is followed by an up (each worker ends healthy).
	unreachable := 0
	var perWorker []string
	for i := range trans {
		down, up := int(trans[i].down.Load()), int(trans[i].up.Load())
		unreachable += down
		perWorker = append(perWorker, fmt.Sprintf("%d/%d", down, up))
		if down != up {
			t.Errorf("worker %d logged %d times that the store was unreachable and %d times that it was reachable again", i, down, up)
		}
		if health[i].sawDown && down == 0 {
			t.Errorf("worker %d went unhealthy without logging it", i)
		}
		if mustGoDown && down == 0 {
			t.Errorf("worker %d never logged that the store was unreachable, across %d %ss", i, len(windows), kind)
		}
	}
	if limit := p.workers*len(windows) + p.workers; unreachable > limit {
		t.Errorf("'store unreachable' logged %d times (per worker down/up: %v) for %d workers and %d outages; at most %d expected (once per worker per outage, plus one per worker)",
			unreachable, perWorker, p.workers, len(windows), limit)
	}

	var total time.Duration
	for _, w := range windows {
		total += w.to.Sub(w.from)
	}
	t.Logf("lost=%d duplicated=%d %ss=%d timers=%d (Publish ok %d, failed %d: %d during the outages, %d of the failed delivered anyway; outage %s each, lease %v; %d workers x %d, %d went unhealthy and back; 'store unreachable' logged %d times, per worker down/up %v)",
		lost, dup, kind, len(windows), len(okIDs), len(okIDs), failed, failedInOutage, uncertainDelivered, fmtDur(p.outage), p.lease, p.workers, p.conc, sawDown, unreachable, perWorker)
}
