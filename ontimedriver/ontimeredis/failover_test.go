package ontimeredis_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// failoverRun is one failover experiment: publishers and a worker run on
// topics, one node dies (SIGKILL), a replica is promoted, and the
// experiment measures when the dead node's topics publish and deliver
// again, and what was lost or delivered twice.
type failoverRun struct {
	t      *testing.T
	client func(testing.TB) redis.UniversalClient
	topics []string
	victim string // a topic of the node that dies
	kill   func()
	// promoted reports whether the replica now serves the victim's keys
	// as a master.
	promoted func(context.Context) bool
}

// result of a failover run.
type failoverResult struct {
	killed, promoted, published, delivered time.Time
	acked, lost, duplicated                int
	lostRecent                             int // of the lost, acked in the last 100 ms before the kill
	sawFault                               bool
}

func (r *failoverRun) run() failoverResult {
	t := r.t
	ctx := t.Context()
	prefix := redistest.Prefix(t)
	open := func() *ontimeredis.Driver {
		d, err := ontimeredis.New(r.client(t), &ontimeredis.Options{Prefix: prefix, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	pubDrv, workDrv := open(), open()
	pub, err := ontime.NewClient(pubDrv, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	wc, err := ontime.NewClient(workDrv, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var res failoverResult
	acked := map[string]time.Time{} // id → when its publish was acknowledged
	got := map[string]int{}
	w := ontime.NewWorker(wc, &ontime.WorkerConfig{Logger: quiet, ShutdownTimeout: time.Second})
	for _, topic := range r.topics {
		err := ontime.Handle(w, topic, func(_ context.Context, m *ontime.Message[string]) error {
			mu.Lock()
			defer mu.Unlock()
			got[m.ID]++
			if m.Topic == r.victim && !res.promoted.IsZero() && res.delivered.IsZero() {
				if at, ok := acked[m.ID]; ok && at.After(res.promoted) {
					res.delivered = time.Now()
				}
			}
			return nil
		}, &ontime.TopicOptions{Lease: 5 * time.Second, PollInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
	}
	wctx, stopWorker := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()

	// Publishers: one per topic, a timer due in 100 ms every 20 ms.
	pctx, stopPub := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	for _, topic := range r.topics {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := 0; pctx.Err() == nil; i++ {
				id := fmt.Sprintf("%s-%d", topic, i)
				cctx, cancel := context.WithTimeout(pctx, 2*time.Second)
				_, err := pub.Publish(cctx, topic, "x", ontime.WithID(id), ontime.In(100*time.Millisecond))
				cancel()
				now := time.Now()
				mu.Lock()
				if err == nil {
					acked[id] = now
					if topic == r.victim && !res.promoted.IsZero() && res.published.IsZero() && now.After(res.promoted) {
						res.published = now
					}
				}
				mu.Unlock()
				select {
				case <-pctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
	}

	wait.For(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 50
	}, "deliveries before the kill")
	mu.Lock()
	res.killed = time.Now()
	mu.Unlock()
	r.kill()
	for !r.promoted(ctx) {
		if slices.ContainsFunc(pubDrv.UnavailableTopics(), func(f ontimedriver.TopicFault) bool { return f.Topic == r.victim }) {
			res.sawFault = true
		}
		if time.Since(res.killed) > 60*time.Second {
			t.Fatal("no replica was promoted within 60 s of the kill")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	res.promoted = time.Now()
	mu.Unlock()
	wait.For(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !res.published.IsZero() && !res.delivered.IsZero()
	}, "a publish and a delivery on the dead node's topic %s after the promotion", r.victim)
	// The driver stops listing the topic once its calls succeed again.
	wait.For(t, 15*time.Second, func() bool { return len(pubDrv.UnavailableTopics()) == 0 }, "UnavailableTopics empty again")
	// publishing goes on after the recovery: 50 more acknowledged
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	wait.For(t, 15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= before+50
	}, "50 more publishes acknowledged after the recovery")
	stopPub()
	pwg.Wait()

	// Everything acknowledged is delivered (but what asynchronous
	// replication lost in the master's last moments).
	_ = wait.Until(30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for id := range acked {
			if got[id] == 0 {
				return false
			}
		}
		return true
	})
	stopWorker()
	if err := <-werr; err != nil {
		t.Errorf("worker: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	res.acked = len(acked)
	for id, at := range acked {
		if got[id] == 0 {
			res.lost++
			if at.After(res.killed.Add(-100*time.Millisecond)) && at.Before(res.killed) {
				res.lostRecent++
			}
		}
		if got[id] > 1 {
			res.duplicated++
		}
	}
	return res
}

func (res failoverResult) report(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: promoted %v after the kill; first publish on the dead master's topic %v after the promotion, first delivery of a timer published after it %v after; acked=%d lost=%d duplicated=%d",
		what, res.promoted.Sub(res.killed).Round(time.Millisecond), res.published.Sub(res.promoted).Round(time.Millisecond),
		res.delivered.Sub(res.promoted).Round(time.Millisecond), res.acked, res.lost, res.duplicated)
	if !res.sawFault {
		t.Errorf("UnavailableTopics never listed the dead node's topic during the outage")
	}
	// Only timers acknowledged in the dead master's last moments may be
	// lost (asynchronous replication); and the dead master's topics come
	// back within seconds of the promotion, not at go-redis's next
	// periodic reload (a minute).
	if res.lost != res.lostRecent {
		t.Errorf("lost %d timers, %d of them acknowledged more than 100 ms before the kill", res.lost, res.lost-res.lostRecent)
	}
	if d := res.published.Sub(res.promoted); d > 5*time.Second {
		t.Errorf("first publish %v after the promotion, want within seconds", d)
	}
	if d := res.delivered.Sub(res.promoted); d > 5*time.Second {
		t.Errorf("first delivery %v after the promotion, want within seconds", d)
	}
}

// TestClusterFailover: on a Cluster of 3 masters + 3 replicas (node
// timeout 2 s), a master is SIGKILLed while publishers and a worker run on
// ten topics. Without a restart, the dead master's topics publish and
// deliver again soon after its replica is promoted: the driver reloads the
// slot map on connection errors (go-redis alone would wait for its
// periodic reload), and lists the topic in UnavailableTopics meanwhile.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3, redistest.WithReplicas(3), redistest.NodeTimeout(2*time.Second))
	ctx := t.Context()
	var topics []string
	for i := range 10 {
		topics = append(topics, fmt.Sprintf("fo.%d", i))
	}
	// The victim: the master of the first topic's slot, and its replica.
	any0 := cluster.Servers[0].NewClient(t)
	slot, err := any0.ClusterKeySlot(ctx, "ontime:{"+topics[0]+"}:due").Result()
	if err != nil {
		t.Fatal(err)
	}
	per := int64(16384 / len(cluster.Servers))
	vi := min(int(slot/per), len(cluster.Servers)-1)
	master, replica := cluster.Servers[vi], cluster.Replicas[vi]
	rc := replica.NewClient(t)
	res := (&failoverRun{
		t:      t,
		client: func(tb testing.TB) redis.UniversalClient { return cluster.NewClient(tb) },
		topics: topics, victim: topics[0],
		kill: master.Kill,
		promoted: func(ctx context.Context) bool {
			role, err := rc.Do(ctx, "ROLE").Slice()
			return err == nil && len(role) > 0 && role[0] == "master"
		},
	}).run()
	res.report(t, "Cluster")
}

// TestSentinelFailover: the same with Sentinel: the primary is SIGKILLed,
// the sentinels promote the replica, and go-redis's failover client
// follows it.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t)
	var topics []string
	for i := range 4 {
		topics = append(topics, fmt.Sprintf("fo.%d", i))
	}
	res := (&failoverRun{
		t:      t,
		client: func(tb testing.TB) redis.UniversalClient { return s.NewClient(tb) },
		topics: topics, victim: topics[0],
		kill: s.Primary.Kill,
		promoted: func(ctx context.Context) bool {
			a, err := s.PrimaryAddr(ctx)
			return err == nil && a == s.Replicas[0].Addr && !strings.Contains(a, s.Primary.Addr)
		},
	}).run()
	res.report(t, "Sentinel")
}
