//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// failoverParams sizes TestFailoverCluster and TestFailoverSentinel; see
// params_*_test.go.
type failoverParams struct {
	timers int           // how many timers are published, at an even pace
	spread time.Duration // over this window; the kill is in its middle
	// Each timer is due between minDelay and maxDelay after the instant
	// it is published at, so timers are published and delivered
	// throughout the window, the kill included.
	minDelay, maxDelay time.Duration
	publishers         int // goroutines publishing (one timer at a time each)
	workers            int // ontime workers, each with its own Redis client
	conc               int // each worker's MaxConcurrency
	lease              time.Duration
	waitTimeout        time.Duration // the timeout of WaitReplicas(1, ...)
}

// failoverShards is the shard count of the topic: one shard per master of
// the Cluster.
const failoverShards = 3

// lossWindow is how long before the kill a publish acknowledged without
// WaitReplicas may have been acknowledged and still be lost by the
// failover (asynchronous replication): the replication lag on loopback is
// well under a millisecond, and the window is wide so that a busy machine
// does not fail the test, yet narrow enough that a shard that stops
// serving (whose timers due after the kill were acknowledged up to
// maxDelay before it) fails it.
const lossWindow = time.Second

// The failover runs (issue 24): a topic sharded over failoverShards key
// groups, publishers publishing timers due over a window, workers consuming
// them, and in the middle of the window the master of one or more shards is
// SIGKILLed. Its replica is promoted, the dead master is restarted (it comes
// back as a replica of the promoted one) and the run goes on to the end.
// Then it counts lost (acknowledged publishes never delivered), duplicated
// (deliveries beyond the first per timer) and early (deliveries before the
// due time) timers, and prints them as "lost=N duplicated=M early=E" with
// the times from the promotion to the first publish and delivery on the dead
// master's shards. Without WaitReplicas only publishes acknowledged in the
// dead master's last moments may be lost; with WaitReplicas(1, ...) none
// may be.
//
// TestFailoverClusterWaitReplicas runs in the default run too (about 20 s);
// the others only with -tags stress (failover_stress_test.go).

// TestFailoverClusterWaitReplicas: a Cluster of 3 masters + 3 replicas,
// publishes with WaitReplicas(1, ...): lost must be 0.
func TestFailoverClusterWaitReplicas(t *testing.T) {
	runFailover(t, failoverDefaults, true, clusterTopology(t))
}

// clusterTopology starts a Redis Cluster of 3 masters + 3 replicas
// (cluster-node-timeout 2 s, as issue 24's measurement, and AOF with fsync
// on every write); the master killed is the second, which holds one shard
// (Replicas[i] replicates Servers[i]).
func clusterTopology(t *testing.T) failoverTopology {
	c := redistest.StartCluster(t, 3, redistest.WithReplicas(3), redistest.NodeTimeout(2*time.Second),
		redistest.ClusterServerOptions(redistest.AppendOnly()))
	return failoverTopology{
		name:    "Cluster 3 masters + 3 replicas",
		client:  func(tb testing.TB) redis.UniversalClient { return c.NewClient(tb) },
		masters: c.Servers,
		victim:  c.Servers[1], heir: c.Replicas[1],
	}
}

func modeName(waitRepl bool) string {
	if waitRepl {
		return "WaitReplicas"
	}
	return "async"
}

// failoverTopology is what runFailover needs of a topology.
type failoverTopology struct {
	name   string
	client func(testing.TB) redis.UniversalClient
	// masters are the servers that hold the topic's shards at the start.
	masters []*redistest.Server
	// victim is the master killed, heir the replica that takes over.
	victim, heir *redistest.Server
	// announced, if set, reports whether the topology tells its clients
	// about the promotion; the victim is restarted only then.
	announced func(context.Context) bool
	// rejoin, if set, makes the restarted victim a replica of the heir
	// (else it must find its place itself).
	rejoin func(context.Context) error
	// logs, if set, returns what the topology's processes logged, for a
	// failure message.
	logs func() string
}

// pubRec is one timer's publish.
type pubRec struct {
	start, end time.Time // the call
	err        error
	done       bool
}

// foDelivery is one call of the failover run's handler.
type foDelivery struct {
	i       int // the timer's index
	at      time.Time
	attempt int
}

// failoverRun is the state of one run, shared by its goroutines.
type failoverRun struct {
	p      failoverParams
	ids    []string
	index  map[string]int
	shard  []int       // each timer's shard
	pubAt  []time.Time // when each timer is published
	due    []time.Time // and due
	mu     sync.Mutex
	pubs   []pubRec
	dels   []foDelivery
	stray  []string // delivered ids that were never published
	active atomic.Int64
}

// shardOf is the shard of a timer id, as the driver documents it
// (ontimeredis.Options.Shards): fnv32a(id) mod n. The run checks it
// against the store before the kill.
func shardOf(id string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

func runFailover(t *testing.T, p failoverParams, waitRepl bool, topo failoverTopology) {
	ctx := t.Context()
	prefix := redistest.Prefix(t)
	const topic = "fo"
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	open := func() *ontime.Client {
		d, err := ontimeredis.New(topo.client(t), &ontimeredis.Options{Prefix: prefix, Logger: quiet,
			Shards: map[string]int{topic: failoverShards}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	// The plan: timer i is published at start + i*spread/timers, due a
	// delay in [minDelay, maxDelay) later (a golden-ratio sequence, so
	// that delays are spread evenly and the run is the same every time).
	r := &failoverRun{p: p, index: map[string]int{}}
	start := time.Now().Add(time.Second)
	for i := range p.timers {
		id := fmt.Sprintf("t%06d", i)
		r.ids = append(r.ids, id)
		r.index[id] = i
		r.shard = append(r.shard, shardOf(id, failoverShards))
		at := start.Add(time.Duration(int64(i) * int64(p.spread) / int64(p.timers)))
		frac := float64(i)*0.6180339887 - float64(int64(float64(i)*0.6180339887))
		delay := p.minDelay + time.Duration(frac*float64(p.maxDelay-p.minDelay))
		r.pubAt = append(r.pubAt, at)
		// whole milliseconds: the store keeps due times in ms, rounded up
		r.due = append(r.due, at.Add(delay).Truncate(time.Millisecond))
	}
	r.pubs = make([]pubRec, p.timers)

	// Workers: each its own client of the topology.
	var werrs []chan error
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	for range p.workers {
		w := ontime.NewWorker(open(), &ontime.WorkerConfig{Logger: quiet, ShutdownTimeout: 5 * time.Second})
		err := ontime.Handle(w, topic, func(_ context.Context, m *ontime.Message[string]) error {
			r.active.Add(1)
			defer r.active.Add(-1)
			now := time.Now()
			r.mu.Lock()
			defer r.mu.Unlock()
			i, ok := r.index[m.ID]
			if !ok {
				r.stray = append(r.stray, m.ID)
				return nil
			}
			r.dels = append(r.dels, foDelivery{i: i, at: now, attempt: m.Attempt})
			return nil
		}, &ontime.TopicOptions{MaxConcurrency: p.conc, Lease: p.lease})
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan error, 1)
		werrs = append(werrs, ch)
		go func() { ch <- w.Run(wctx) }()
	}
	stopAll := func() {
		stopWorkers()
		for _, ch := range werrs {
			if err := <-ch; err != nil {
				t.Errorf("worker: %v", err)
			}
		}
		werrs = nil
	}
	defer func() {
		if werrs != nil {
			stopAll()
		}
	}()

	// Publishers: each takes the next timer of the plan, waits for its
	// instant and publishes it once (no retry: a failed publish is not
	// acknowledged, and the run counts it as a publish error).
	pub := open()
	var next atomic.Int64
	var pwg sync.WaitGroup
	defer pwg.Wait()
	pctx, stopPub := context.WithCancel(ctx)
	defer stopPub()
	for range p.publishers {
		pwg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= p.timers {
					return
				}
				select {
				case <-pctx.Done():
					return
				case <-time.After(time.Until(r.pubAt[i])):
				}
				opts := []ontime.PublishOption{ontime.WithID(r.ids[i]), ontime.At(r.due[i])}
				if waitRepl {
					opts = append(opts, ontime.WaitReplicas(1, p.waitTimeout))
				}
				cctx, cancel := context.WithTimeout(pctx, 2*time.Second)
				began := time.Now()
				_, err := pub.Publish(cctx, topic, "x", opts...)
				cancel()
				ended := time.Now()
				r.mu.Lock()
				r.pubs[i] = pubRec{start: began, end: ended, err: err, done: true}
				r.mu.Unlock()
			}
		})
	}

	// The kill, in the middle of the window.
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(start.Add(p.spread / 2))):
	}
	victimShards := r.checkVictim(t, topo, prefix, topic)
	r.mu.Lock()
	killed := time.Now()
	var ackedBefore, deliveredBefore int
	for i, pr := range r.pubs {
		if pr.done && pr.err == nil && pr.end.After(killed.Add(-lossWindow)) && slices.Contains(victimShards, r.shard[i]) {
			ackedBefore++
		}
	}
	for _, d := range r.dels {
		if d.at.After(killed.Add(-lossWindow)) {
			deliveredBefore++
		}
	}
	r.mu.Unlock()
	if ackedBefore == 0 || deliveredBefore == 0 {
		t.Fatalf("timers were not flowing at the kill: %d publishes on the victim's shards acknowledged and %d deliveries in the last %v", ackedBefore, deliveredBefore, lossWindow)
	}
	topo.victim.Kill()
	heir := topo.heir.NewClient(t)
	if err := wait.Until(60*time.Second, func() bool {
		role, err := heir.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master"
	}); err != nil {
		t.Fatalf("%v waiting for the replica %s to be promoted", err, topo.heir.Addr)
	}
	promoted := time.Now()
	var announced time.Time
	if topo.announced != nil {
		if err := wait.Until(60*time.Second, func() bool { return topo.announced(ctx) }); err != nil {
			t.Fatalf("%v waiting for the promotion of %s to be announced", err, topo.heir.Addr)
		}
		announced = time.Now()
	}
	// The dead master comes back (with its AOF) and becomes a replica of
	// the promoted one: until then, publishes that wait for a replica on
	// its shards fail.
	topo.victim.Restart()
	restarted := time.Now()
	if topo.rejoin != nil {
		if err := topo.rejoin(ctx); err != nil {
			t.Errorf("making the restarted %s a replica of %s: %v", topo.victim.Addr, topo.heir.Addr, err)
		}
	}
	var replicaBack time.Time
	if err := wait.Until(60*time.Second, func() bool {
		info, err := heir.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "state=online")
	}); err != nil {
		vi, verr := topo.victim.NewClient(t).Info(ctx, "replication").Result()
		hi, herr := heir.Info(ctx, "replication").Result()
		t.Errorf("%v waiting for the restarted %s to replicate the promoted %s: the restarted one says %s (%v); the promoted one %s (%v)",
			err, topo.victim.Addr, topo.heir.Addr, vi, verr, hi, herr)
	} else {
		replicaBack = time.Now()
	}

	pwg.Wait()
	lastPub := r.pubAt[len(r.pubAt)-1]
	// Every timer is due; wait until the store holds none (scheduled or
	// leased) and no handler runs: every delivery there will be is made.
	lastDue := slices.MaxFunc(r.due, func(a, b time.Time) int { return a.Compare(b) })
	var counts ontime.Counts
	var cerr error
	drained := func() bool {
		if time.Now().Before(lastDue) {
			return false
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		counts, cerr = pub.Count(cctx, topic)
		return cerr == nil && counts.Scheduled == 0 && counts.Leased == 0 && r.active.Load() == 0
	}
	if err := wait.Until(time.Until(lastDue)+60*time.Second, drained); err != nil {
		t.Errorf("%v waiting for the store to drain: %+v (%v)", err, counts, cerr)
	}
	stopAll()
	// The promoted replica is still the master: no second failover (to
	// the restarted victim, with its old data) happened.
	if role, err := heir.Do(ctx, "ROLE").Slice(); err != nil || len(role) == 0 || role[0] != "master" {
		t.Errorf("the promoted %s is no longer the master at the end: ROLE %v (%v)", topo.heir.Addr, role, err)
		if topo.logs != nil {
			t.Logf("the topology's logs:\n%s", topo.logs())
		}
	}

	res := r.tally(victimShards, killed, promoted)
	res.lastPub = lastPub
	res.announced, res.restarted, res.replicaBack = announced, restarted, replicaBack
	res.report(t, topo.name, modeName(waitRepl))
	res.check(t, waitRepl)
}

// checkVictim finds the shards of the topic each master holds, checks
// that they are spread as expected (on a Cluster one per master), and
// that the victim's shards hold timers the run acknowledged, with the
// shard of their id as the driver documents it. It returns the victim's
// shards.
func (r *failoverRun) checkVictim(t *testing.T, topo failoverTopology, prefix, topic string) []int {
	t.Helper()
	ctx := t.Context()
	masters := topo.masters
	names := map[int]string{} // shard → internal topic, on the victim
	seen := map[int]bool{}
	for _, m := range masters {
		cl := m.NewClient(t)
		keys, err := cl.Keys(ctx, prefix+"{"+topic+"#*}:due").Result()
		if err != nil {
			t.Fatalf("KEYS on %s: %v", m.Addr, err)
		}
		for _, k := range keys {
			name := strings.TrimSuffix(strings.TrimPrefix(k, prefix+"{"), "}:due")
			i, err := strconv.Atoi(strings.Split(strings.TrimPrefix(name, topic+"#"), ".")[0])
			if err != nil {
				t.Fatalf("unexpected key %q", k)
			}
			if seen[i] {
				t.Fatalf("shard %d is on two masters", i)
			}
			seen[i] = true
			if m == topo.victim {
				names[i] = name
			}
		}
		if len(masters) > 1 && len(keys) != 1 {
			t.Fatalf("master %s holds %d shards of the topic (%v), want 1", m.Addr, len(keys), keys)
		}
	}
	if len(seen) != failoverShards || len(names) == 0 {
		t.Fatalf("found shards %v, %d of them on the victim; want %d shards, at least one on the victim", seen, len(names), failoverShards)
	}
	// Timers acknowledged on the victim's shards and due in more than a
	// second (not claimed yet) are in its shard's hash.
	vc := topo.victim.NewClient(t)
	r.mu.Lock()
	var check []int
	for i := len(r.pubs) - 1; i >= 0 && len(check) < 20; i-- {
		pr := r.pubs[i]
		if _, ok := names[r.shard[i]]; ok && pr.done && pr.err == nil && time.Until(r.due[i]) > time.Second {
			check = append(check, i)
		}
	}
	r.mu.Unlock()
	if len(check) == 0 {
		t.Fatal("no pending timer acknowledged on the victim's shards")
	}
	for _, i := range check {
		ok, err := vc.HExists(ctx, prefix+"{"+names[r.shard[i]]+"}:msg", r.ids[i]).Result()
		if err != nil || !ok {
			t.Fatalf("timer %s (shard %d by fnv32a) is not in %s's shard %s: %v %v", r.ids[i], r.shard[i], topo.victim.Addr, names[r.shard[i]], ok, err)
		}
	}
	var out []int
	for i := range names {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// failoverResult is what a run measured.
type failoverResult struct {
	victimShards                      []int
	killed, promoted                  time.Time
	announced, restarted, replicaBack time.Time
	// On the victim's shards, after the promotion: the first publish
	// acknowledged, the first that reached the promoted master
	// (acknowledged, or ErrNotReplicated), the first delivery, and the
	// first delivery of a timer published after the promotion.
	firstPub, firstReach, firstDel, firstDelPub time.Time
	lastPub                                     time.Time // the last publish's planned instant
	acked, failedDelivered, delivered           int       // failedDelivered: publishes that failed, delivered anyway
	lost, duplicated, early, stray              int
	lostIDs                                     []string
	lostOutside                                 int // lost, but acknowledged outside [kill - lossWindow, kill]
	windowAcked                                 int // acknowledged on the victim's shards in [kill - lossWindow, kill]
	pubErrs, pubErrsVictim, notReplicated       int
	errExamples                                 []string
	firstErr, lastErr                           time.Time
	delsAfterPromotion                          int // on the victim's shards
	liveDuringOutage, liveDueInOutage           int // the other shards between kill and promotion: delivered, due
	maxLate                                     time.Duration
}

func (r *failoverRun) tally(victimShards []int, killed, promoted time.Time) failoverResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := failoverResult{victimShards: victimShards, killed: killed, promoted: promoted, stray: len(r.stray)}
	onVictim := func(i int) bool { return slices.Contains(victimShards, r.shard[i]) }
	seen := make([]int, len(r.ids))
	first := make([]time.Time, len(r.ids))
	for _, d := range r.dels {
		seen[d.i]++
		if seen[d.i] == 1 {
			first[d.i] = d.at
		}
		if d.at.Before(r.due[d.i]) {
			res.early++
		}
		if onVictim(d.i) && d.at.After(promoted) {
			res.delsAfterPromotion++
			if res.firstDel.IsZero() || d.at.Before(res.firstDel) {
				res.firstDel = d.at
			}
			if pr := r.pubs[d.i]; reached(pr.err) && pr.start.After(promoted) && (res.firstDelPub.IsZero() || d.at.Before(res.firstDelPub)) {
				res.firstDelPub = d.at
			}
		}
		if !onVictim(d.i) && d.at.After(killed) && d.at.Before(promoted) {
			res.liveDuringOutage++
		}
	}
	for i, pr := range r.pubs {
		if pr.done && reached(pr.err) && onVictim(i) && pr.end.After(promoted) && (res.firstReach.IsZero() || pr.end.Before(res.firstReach)) {
			res.firstReach = pr.end
		}
		if !onVictim(i) && r.due[i].After(killed) && r.due[i].Before(promoted) {
			res.liveDueInOutage++
		}
		if seen[i] > 0 {
			res.delivered++
			res.duplicated += seen[i] - 1
			res.maxLate = max(res.maxLate, first[i].Sub(r.due[i]))
		}
		if !pr.done {
			continue
		}
		if pr.err != nil {
			if seen[i] > 0 {
				res.failedDelivered++
			}
			res.pubErrs++
			if onVictim(i) {
				res.pubErrsVictim++
			}
			if errors.Is(pr.err, ontimedriver.ErrNotReplicated) {
				res.notReplicated++
			}
			if res.firstErr.IsZero() || pr.end.Before(res.firstErr) {
				res.firstErr = pr.end
			}
			if pr.end.After(res.lastErr) {
				res.lastErr = pr.end
			}
			if len(res.errExamples) < 3 {
				res.errExamples = append(res.errExamples, pr.err.Error())
			}
			continue
		}
		res.acked++
		inWindow := onVictim(i) && !pr.end.Before(killed.Add(-lossWindow)) && !pr.end.After(killed)
		if inWindow {
			res.windowAcked++
		}
		if onVictim(i) && pr.end.After(promoted) && (res.firstPub.IsZero() || pr.end.Before(res.firstPub)) {
			res.firstPub = pr.end
		}
		if seen[i] == 0 {
			res.lost++
			res.lostIDs = append(res.lostIDs, r.ids[i])
			if !inWindow {
				res.lostOutside++
			}
		}
	}
	return res
}

// reached reports whether a publish that returned err reached the master:
// it was acknowledged, or it is on the master and fewer replicas than
// asked acknowledged it.
func reached(err error) bool { return err == nil || errors.Is(err, ontimedriver.ErrNotReplicated) }

func (res failoverResult) report(t *testing.T, topo, mode string) {
	t.Helper()
	since := func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return "never"
		}
		return fmtDur(a.Sub(b))
	}
	t.Logf("%s, %s: lost=%d duplicated=%d early=%d", topo, mode, res.lost, res.duplicated, res.early)
	t.Logf("  killed the master of shard(s) %v; kill → promotion %s; promotion → first publish on its shard(s) that reached the new master %s, acknowledged %s; → first delivery there %s (of a timer published after the promotion: %s); deliveries there after the promotion %d",
		res.victimShards, since(res.promoted, res.killed), since(res.firstReach, res.promoted), since(res.firstPub, res.promoted),
		since(res.firstDel, res.promoted), since(res.firstDelPub, res.promoted), res.delsAfterPromotion)
	announced := ""
	if !res.announced.IsZero() {
		announced = fmt.Sprintf("promotion announced by every sentinel %s after it; ", since(res.announced, res.promoted))
	}
	t.Logf("  %sdead master restarted %s after the promotion, replicating again %s after the promotion",
		announced, since(res.restarted, res.promoted), since(res.replicaBack, res.promoted))
	t.Logf("  publishes: acked=%d failed=%d (%d on the dead master's shards, %d ErrNotReplicated, %d delivered anyway), failures from %s to %s after the kill, e.g. %q",
		res.acked, res.pubErrs, res.pubErrsVictim, res.notReplicated, res.failedDelivered, since(res.firstErr, res.killed), since(res.lastErr, res.killed), res.errExamples)
	t.Logf("  delivered=%d timers, max lateness %s; the other shards delivered %d timers between kill and promotion (%d fell due then); acked on the victim's shards in the %v before the kill: %d",
		res.delivered, fmtDur(res.maxLate), res.liveDuringOutage, res.liveDueInOutage, lossWindow, res.windowAcked)
	if res.lost > 0 {
		ids := res.lostIDs
		if len(ids) > 20 {
			ids = append(ids[:20:20], "...")
		}
		t.Logf("  lost: %v", ids)
	}
}

func (res failoverResult) check(t *testing.T, waitRepl bool) {
	t.Helper()
	if res.early != 0 {
		t.Errorf("%d deliveries before their due time", res.early)
	}
	if res.stray != 0 {
		t.Errorf("%d deliveries of ids never published", res.stray)
	}
	// The dead master's shards serve again: publishes reach the promoted
	// master and timers are delivered there after the promotion.
	if res.firstReach.IsZero() || res.firstDel.IsZero() || res.firstDelPub.IsZero() {
		t.Errorf("after the promotion the dead master's shards: first publish that reached the promoted master %v, first delivery %v, first delivery of a timer published after it %v (zero: none)",
			res.firstReach, res.firstDel, res.firstDelPub)
	}
	// And acknowledge publishes: at once without WaitReplicas; with it,
	// once the restarted master replicates the promoted one (with one
	// replica per master there is none to wait for before), if that
	// happened a second before the end of the publishing window.
	if res.firstPub.IsZero() && (!waitRepl || !res.replicaBack.IsZero() && res.replicaBack.Before(res.lastPub.Add(-time.Second))) {
		t.Errorf("no publish on the dead master's shards was acknowledged after the promotion (the restarted master replicated again %v after it)",
			res.replicaBack.Sub(res.promoted))
	}
	if waitRepl {
		if res.lost != 0 {
			t.Errorf("lost %d timers acknowledged with WaitReplicas(1, ...): %v", res.lost, res.lostIDs)
		}
		return
	}
	// Without WaitReplicas only what asynchronous replication had not
	// sent in the master's last moments may be lost.
	if res.lostOutside != 0 || res.lost > res.windowAcked {
		t.Errorf("lost %d timers, %d of them not acknowledged on the dead master in the %v before the kill (%d were): %v",
			res.lost, res.lostOutside, lossWindow, res.windowAcked, res.lostIDs)
	}
}
