package kafkadelay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// The test ladder: short delays so that a run takes seconds.
func testLadder(t testing.TB) *kafkadelay.Ladder {
	t.Helper()
	l, err := kafkadelay.NewLadder(
		kafkadelay.Bucket{Delay: 200 * time.Millisecond, Topic: "delay-200ms"},
		kafkadelay.Bucket{Delay: 500 * time.Millisecond, Topic: "delay-500ms"},
		kafkadelay.Bucket{Delay: time.Second, Topic: "delay-1s"},
		kafkadelay.Bucket{Delay: 2 * time.Second, Topic: "delay-2s"},
	)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

const (
	dlqTopic   = "delay-dead"
	partitions = 3
)

var destinations = []string{"orders", "invoices"}

// cluster is a kfake cluster of three brokers on loopback TCP with the
// ladder's bucket topics, the dead-letter topic and the destinations.
type cluster struct {
	*kfake.Cluster
	addrs  []string
	ladder *kafkadelay.Ladder
}

func newCluster(t testing.TB, extra ...kfake.Opt) *cluster {
	t.Helper()
	return newClusterWith(t, testLadder(t), extra...)
}

// newClusterWith is newCluster with another ladder.
func newClusterWith(t testing.TB, l *kafkadelay.Ladder, extra ...kfake.Opt) *cluster {
	t.Helper()
	topics := append(append(l.Topics(), dlqTopic), destinations...)
	opts := append([]kfake.Opt{
		kfake.NumBrokers(3),
		kfake.SeedTopics(partitions, topics...),
		kfake.GroupMinSessionTimeout(500 * time.Millisecond),
	}, extra...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &cluster{Cluster: c, addrs: c.ListenAddrs(), ladder: l}
}

// client returns a franz-go client of the cluster, closed at cleanup.
func (c *cluster) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testLogger writes the republisher's log lines to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b[:len(b)-1]))
	return len(b), nil
}

// runner is a republisher running in a goroutine.
type runner struct {
	*kafkadelay.Republisher
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// stop stops the republisher and waits for Run to return.
func (r *runner) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			t.Errorf("Run: %v", r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30s after its context ended")
	}
}

func (c *cluster) republisher(t testing.TB, mod func(*kafkadelay.Config), opts ...kgo.Opt) *runner {
	t.Helper()
	cfg := kafkadelay.Config{
		Ladder:          c.ladder,
		Group:           "republishers",
		DeadLetterTopic: dlqTopic,
		Logger:          testLogger(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	// A short heartbeat interval: members learn of a rebalance within
	// 250ms instead of franz-go's default 3s (a rebalance takes two rounds
	// with the cooperative balancer).
	opts = append([]kgo.Opt{kgo.SeedBrokers(c.addrs...), kgo.HeartbeatInterval(250 * time.Millisecond)}, opts...)
	r, err := kafkadelay.NewRepublisher(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &runner{Republisher: r, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		run.err = r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-run.done:
		case <-time.After(30 * time.Second):
		}
	})
	return run
}

// delivery is one record read from a destination topic.
type delivery struct {
	id       string
	due      time.Time
	received time.Time
	topic    string
	key      string
	value    string
	headers  []kgo.RecordHeader
}

// sink reads the destination topics (and the dead-letter topic) from the
// start and records every record with the instant it arrived.
type sink struct {
	mu     sync.Mutex
	got    map[string][]delivery // by delivery id
	dead   []*kgo.Record
	total  int
	cancel context.CancelFunc
	done   chan struct{}
}

func (c *cluster) sink(t testing.TB) *sink {
	t.Helper()
	cl := c.client(t,
		kgo.ConsumeTopics(append(slices.Clone(destinations), dlqTopic)...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond),
	)
	ctx, cancel := context.WithCancel(context.Background())
	s := &sink{got: make(map[string][]delivery), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			s.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				if rec.Topic == dlqTopic {
					s.dead = append(s.dead, rec)
					return
				}
				d := delivery{received: now, topic: rec.Topic, key: string(rec.Key), value: string(rec.Value), headers: rec.Headers}
				for _, h := range rec.Headers {
					switch h.Key {
					case kafkadelay.HeaderID:
						d.id = string(h.Value)
					case kafkadelay.HeaderDue:
						ms, _ := strconv.ParseInt(string(h.Value), 10, 64)
						d.due = time.UnixMilli(ms)
					}
				}
				s.got[d.id] = append(s.got[d.id], d)
				s.total++
			})
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// waitUntil checks cond every 20 ms until it holds; after timeout it fails
// the test with what() (called only then, so that it can describe the state
// it found).
func waitUntil(t testing.TB, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", timeout, what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor waits until cond holds (checked under the sink's lock) or the
// timeout passes.
func (s *sink) waitFor(t testing.TB, timeout time.Duration, what string, cond func(*sink) bool) {
	t.Helper()
	waitUntil(t, timeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return cond(s)
	}, func() string { return "waiting for " + what })
}

// drain waits until nothing more can arrive: the republishers' group has
// committed every bucket record (an output is produced before its input is
// committed, so every output, a duplicate included, has been produced),
// and the sink has read every record of the destinations and the
// dead-letter topic. A test checking for duplicates waits for this, not
// for a sleep a loaded machine may spend before they arrive.
func (s *sink) drain(t testing.TB, c *cluster, timeout time.Duration) {
	t.Helper()
	adm := kadm.NewClient(c.client(t))
	var last string
	drained := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		committed, err := adm.FetchOffsets(ctx, "republishers")
		if err != nil {
			last = err.Error()
			return false
		}
		ends, err := adm.ListEndOffsets(ctx, c.ladder.Topics()...)
		if err != nil {
			last = err.Error()
			return false
		}
		var behind []string
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset <= 0 {
				return
			}
			if co, ok := committed.Lookup(o.Topic, o.Partition); !ok || co.At < o.Offset {
				behind = append(behind, fmt.Sprintf("%s/%d committed %d of %d", o.Topic, o.Partition, co.At, o.Offset))
			}
		})
		if len(behind) > 0 {
			last = fmt.Sprint(behind)
			return false
		}
		outs, err := adm.ListEndOffsets(ctx, append(slices.Clone(destinations), dlqTopic)...)
		if err != nil {
			last = err.Error()
			return false
		}
		want := 0
		outs.Each(func(o kadm.ListedOffset) { want += int(o.Offset) })
		s.mu.Lock()
		got := s.total + len(s.dead)
		s.mu.Unlock()
		last = fmt.Sprintf("the sink read %d of %d output records", got, want)
		return got >= want
	}
	waitUntil(t, timeout, drained, func() string {
		return "waiting for every bucket record committed and every output read: " + last
	})
}

// published is what a test published.
type published struct {
	id  string
	due time.Time
	// pastDue: the due instant had passed when it was published (its
	// lateness is not the republisher's).
	pastDue bool
}

// publishMany publishes n records, due at due(i), to the destinations in
// turn, producing asynchronously through Producer.Route. due is called
// right before each record is routed, so a due instant taken from
// time.Now() is a delay from that record's own publish (on a loaded
// machine, publishing thousands of records can take seconds).
func publishMany(t testing.TB, c *cluster, n int, due func(i int) time.Time) map[string]published {
	t.Helper()
	cl := c.client(t)
	p, err := kafkadelay.NewProducer(cl, c.ladder)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]published, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < n; i++ {
		rec := &kgo.Record{
			Topic: destinations[i%len(destinations)],
			Key:   []byte("k" + strconv.Itoa(i%97)),
			Value: []byte("v" + strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{
				{Key: "user", Value: []byte(strconv.Itoa(i))},
			},
		}
		d := due(i)
		routed, err := p.Route(rec, d)
		if err != nil {
			t.Fatal(err)
		}
		id := headerValue(routed, kafkadelay.HeaderID)
		dueMs, _ := strconv.ParseInt(headerValue(routed, kafkadelay.HeaderDue), 10, 64)
		out[id] = published{id: id, due: time.UnixMilli(dueMs), pastDue: routed.Topic == rec.Topic}
		wg.Add(1)
		cl.Produce(context.Background(), routed, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				firstErr = errors.Join(firstErr, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	return out
}

func headerValue(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// check verifies that every published record was delivered, none before
// its due instant, and returns the duplicates and lateness percentiles.
func (s *sink) check(t testing.TB, pub map[string]published) (dups int, lateness []time.Duration) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	early := 0
	for id, p := range pub {
		ds := s.got[id]
		if len(ds) == 0 {
			t.Errorf("record %s (due %v) never delivered", id, p.due.Format(time.RFC3339Nano))
			continue
		}
		dups += len(ds) - 1
		for _, d := range ds {
			if !d.due.Equal(p.due) {
				t.Errorf("record %s delivered with due %v, published with %v", id, d.due, p.due)
			}
			if d.received.Before(p.due) {
				early++
				t.Errorf("record %s received %v before its due instant", id, p.due.Sub(d.received))
			}
		}
		if !p.pastDue {
			lateness = append(lateness, ds[0].received.Sub(p.due))
		}
	}
	for id := range s.got {
		if _, ok := pub[id]; !ok {
			t.Errorf("delivered a record nobody published: %q", id)
		}
	}
	sort.Slice(lateness, func(i, j int) bool { return lateness[i] < lateness[j] })
	if early != 0 {
		t.Errorf("%d deliveries before their due instant", early)
	}
	return dups, lateness
}

// pct returns the p-th percentile of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func latenessLine(l []time.Duration) string {
	if len(l) == 0 {
		return "no deliveries"
	}
	return fmt.Sprintf("lateness at the destination consumer: p50 %v p99 %v max %v (n=%d)",
		pct(l, 0.5).Round(time.Microsecond), pct(l, 0.99).Round(time.Microsecond), l[len(l)-1].Round(time.Microsecond), len(l))
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}
