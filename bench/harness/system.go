package harness

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// timer is one timer a scenario publishes. A zero due means "due now".
type timer struct {
	due  time.Time
	body []byte
}

// system is one timer system under test (ontime, a peer or a baseline), as
// the scenarios drive it. Each method takes a queue (topic) name; scenarios
// use a fresh one per phase.
type system interface {
	// publish writes ts. batch <= 1 publishes one timer per call; larger
	// values use the system's batch API with up to batch timers per call
	// (systems without one publish one by one).
	publish(ctx context.Context, queue string, ts []timer, batch int) error
	// work starts handlers for queue with concurrency w; h runs at the
	// start of every delivery with the timer's body, and the handler then
	// returns success at once. stop stops them gracefully.
	work(ctx context.Context, queue string, w int, h func(body []byte)) (stop func(context.Context), err error)
	// pending counts the queue's timers that are not done (acked).
	pending(ctx context.Context, queue string) (int64, error)
	// roundTrips is the client-side count of requests sent to the store so
	// far (commands, pipelines, scripts, SQL statements, batches).
	roundTrips() int64
	close()
}

// sysSpec describes a system and how to open it.
type sysSpec struct {
	Name string `json:"name"`
	// Family groups variants of one product: ontime, asynq, river, baseline.
	Family string `json:"family"`
	// Store is "redis" or "postgres".
	Store string `json:"store"`
	// Settings says what is not default, in words.
	Settings string `json:"settings"`
	// Batch reports whether the system has a batch publish API.
	Batch bool `json:"batch"`
	// Tuned marks a variant that differs from another only on the worker
	// side: its publish rates are not measured again.
	Tuned bool `json:"tuned"`
	// Scenarios are the scenarios the system takes part in (each scenario
	// may still skip systems it does not apply to, e.g. memory skips
	// non-Redis stores). Empty means the original set (originalScenarios:
	// raw to kafka); scenarios added later (embedded, publish, http, ...)
	// run only the systems that name them here, so a new scenario adds
	// itself to the systems it wants without touching the others.
	Scenarios []string `json:"scenarios,omitempty"`
	open      func(e *env) (system, error)
}

// env is what systems and scenarios share in one harness run.
type env struct {
	cfg   Config
	redis *RedisServer
	pgMu  sync.Mutex
	pg    *PostgresServer
	pgErr error
	admin *redis.Client
	logf  func(format string, args ...any)
}

// postgres starts the PostgreSQL server on first use.
func (e *env) postgres(ctx context.Context) (*PostgresServer, error) {
	e.pgMu.Lock()
	defer e.pgMu.Unlock()
	if e.pg == nil && e.pgErr == nil {
		e.logf("starting PostgreSQL (initdb in a temporary directory)")
		e.pg, e.pgErr = StartPostgres(ctx, e.cfg.PGBin)
		if e.pgErr == nil {
			e.logf("PostgreSQL up: %s", e.pg.Version)
		}
	}
	return e.pg, e.pgErr
}

// newRedis returns a client of the harness's Redis counting round trips in
// rt.
func (e *env) newRedis(rt *roundTrips, poolSize int) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:         e.redis.Addr,
		PoolSize:     poolSize,
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 10 * time.Second,
	})
	if rt != nil {
		c.AddHook(rt)
	}
	return c
}

// Body layout: 8 bytes due (Unix ns, 0 for due now), 4 bytes sequence
// number, 4 bytes run tag, then padding up to the body size.
const bodyHeader = 16

func makeBody(due time.Time, seq uint32, tag uint32, size int) []byte {
	b := make([]byte, max(size, bodyHeader))
	if !due.IsZero() {
		binary.BigEndian.PutUint64(b[0:8], uint64(due.UnixNano()))
	}
	binary.BigEndian.PutUint32(b[8:12], seq)
	binary.BigEndian.PutUint32(b[12:16], tag)
	for i := bodyHeader; i < len(b); i++ {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

func parseBody(b []byte) (dueNs int64, seq, tag uint32, ok bool) {
	if len(b) < bodyHeader {
		return 0, 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(b[0:8])), binary.BigEndian.Uint32(b[8:12]), binary.BigEndian.Uint32(b[12:16]), true
}

// tracker records the deliveries of one phase: how many, which, when, and
// how late.
type tracker struct {
	n      int
	tag    uint32
	seen   []atomic.Uint32
	late   []int64 // first delivery's fire minus due, ns (due > 0 only)
	fired  []int64 // first delivery's fire time, Unix ns
	unique atomic.Int64
	total  atomic.Int64
	bad    atomic.Int64 // bodies that do not belong to this phase
	first  atomic.Int64
	last   atomic.Int64
	done   chan struct{}
	once   sync.Once
}

var tagSeq atomic.Uint32

func newTracker(n int) *tracker {
	return &tracker{
		n:     n,
		tag:   tagSeq.Add(1),
		seen:  make([]atomic.Uint32, n),
		late:  make([]int64, n),
		fired: make([]int64, n),
		done:  make(chan struct{}),
	}
}

func (t *tracker) handle(body []byte) {
	now := time.Now().UnixNano()
	due, seq, tag, ok := parseBody(body)
	if !ok || tag != t.tag || int(seq) >= t.n {
		t.bad.Add(1)
		return
	}
	t.total.Add(1)
	if t.seen[seq].Add(1) != 1 {
		return // a redelivery
	}
	t.fired[seq] = now
	if due > 0 {
		t.late[seq] = now - due
	}
	t.first.CompareAndSwap(0, now)
	for {
		l := t.last.Load()
		if now <= l || t.last.CompareAndSwap(l, now) {
			break
		}
	}
	if t.unique.Add(1) == int64(t.n) {
		t.once.Do(func() { close(t.done) })
	}
}

// body returns timer i's body for this tracker.
func (t *tracker) body(due time.Time, i int, size int) []byte {
	return makeBody(due, uint32(i), t.tag, size)
}

// latenessMs returns fire-minus-due of every delivered timer, in ms.
func (t *tracker) latenessMs() []float64 {
	out := make([]float64, 0, t.n)
	for i := range t.n {
		if t.seen[i].Load() > 0 {
			out = append(out, float64(t.late[i])/1e6)
		}
	}
	return out
}

// waitDone waits until every timer was delivered and the system reports
// none pending (acks have landed). It returns the instant the system was
// first seen empty and how many pending checks it made.
func waitDone(ctx context.Context, s system, queue string, t *tracker) (time.Time, int, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return time.Time{}, 0, fmt.Errorf("%d of %d timers delivered: %w", t.unique.Load(), t.n, ctx.Err())
	}
	calls := 0
	for {
		n, err := s.pending(ctx, queue)
		calls++
		if err == nil && n == 0 {
			return time.Now(), calls, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return time.Time{}, calls, err
			}
			return time.Time{}, calls, fmt.Errorf("all delivered but %d still pending: %w", n, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// publishAll publishes ts with p concurrent publishers and returns how long
// it took.
func publishAll(ctx context.Context, s system, queue string, ts []timer, batch, p int) (time.Duration, error) {
	p = max(1, min(p, len(ts)))
	chunk := (len(ts) + p - 1) / p
	if batch > 1 {
		// Keep whole batches per publisher.
		chunk = (chunk + batch - 1) / batch * batch
	}
	var wg sync.WaitGroup
	errs := make(chan error, p)
	start := time.Now()
	for lo := 0; lo < len(ts); lo += chunk {
		hi := min(lo+chunk, len(ts))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.publish(ctx, queue, ts[lo:hi], batch); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	return d, <-errs
}

// queueName returns a fresh queue name for a phase.
func queueName(sys, phase string) string {
	r := strings.NewReplacer("-", "_", ".", "_")
	return fmt.Sprintf("b_%s_%s_%d", r.Replace(sys), phase, queueSeq.Add(1))
}

var queueSeq atomic.Int64
