package kafkadelay_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ontime-go/ontime/kafkadelay"
)

// commitLog records every OffsetCommit the cluster receives, in the
// order it handles them.
type commitLog struct {
	mu   sync.Mutex
	last map[string]int64 // "topic/partition" -> last offset committed
	n    int
	back []string // commits that moved an offset backwards
}

func (l *commitLog) observe(req kmsg.Request) (kmsg.Response, error, bool) {
	r := req.(*kmsg.OffsetCommitRequest)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			k := fmt.Sprintf("%s%x/%d", t.Topic, t.TopicID, p.Partition) // newer requests name topics by id
			if prev, ok := l.last[k]; ok && p.Offset < prev {
				l.back = append(l.back, fmt.Sprintf("%s: %d after %d", k, p.Offset, prev))
			}
			l.last[k] = p.Offset
			l.n++
		}
	}
	return nil, nil, false // observe only: the cluster handles it
}

// A commit of the commit loop is held (between its snapshot and the
// request) while a rebalance revokes partitions and commits them: the
// cluster must never see a partition's committed offset go backwards.
// Before commits were ordered, the held snapshot was committed after the
// revocation's newer one and rewound the partition.
func TestCommitsNeverRewind(t *testing.T) {
	c := newCluster(t)
	log := &commitLog{last: make(map[string]int64)}
	c.ControlKey(int16(kmsg.OffsetCommit), log.observe)
	s := c.sink(t)

	var armed, held atomic.Bool
	heldCh := make(chan struct{})
	revoked := make(chan struct{})
	var revokedOnce sync.Once
	restore := kafkadelay.SetTestHookBeforeCommit(func(kind string) {
		if kind != "loop" || !armed.Load() || !held.CompareAndSwap(false, true) {
			return
		}
		close(heldCh)
		// Hold the loop's snapshot until a revocation has committed (the
		// old, unordered code), or 5 s (ordered: the revocation waits for
		// this commit).
		select {
		case <-revoked:
		case <-time.After(5 * time.Second):
		}
	})
	t.Cleanup(restore)

	obs1 := &revokeSignal{fn: func(ev kafkadelay.Rebalance) {
		if ev.Kind == "revoked" {
			revokedOnce.Do(func() { close(revoked) })
		}
	}}
	r1 := c.republisher(t, func(cfg *kafkadelay.Config) { cfg.Observer = obs1 })
	// Records due within a second, produced steadily until the
	// revocation: every partition keeps moving while the loop's commit
	// is held.
	stop := make(chan struct{})
	var pubMu sync.Mutex
	pub := make(map[string]published)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		cl := c.client(t, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		p, err := kafkadelay.NewProducer(cl, c.ladder)
		if err != nil {
			t.Error(err)
			return
		}
		rng := rand.New(rand.NewPCG(5, 6))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			due := time.Now().Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
			rec, err := p.Route(&kgo.Record{Topic: destinations[i%2], Value: []byte("v" + strconv.Itoa(i))}, due)
			if err != nil {
				t.Error(err)
				return
			}
			if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			dueMs, _ := strconv.ParseInt(headerValue(rec, kafkadelay.HeaderDue), 10, 64)
			id := headerValue(rec, kafkadelay.HeaderID)
			pubMu.Lock()
			pub[id] = published{id: id, due: time.UnixMilli(dueMs), pastDue: rec.Topic == destinations[i%2]}
			pubMu.Unlock()
		}
	}()
	s.waitFor(t, 30*time.Second, "the first deliveries", func(s *sink) bool { return len(s.got) >= 200 })
	armed.Store(true)
	select {
	case <-heldCh:
	case <-time.After(30 * time.Second):
		t.Fatal("the commit loop committed nothing for 30s")
	}
	t.Logf("%s: the loop's commit is held; a second republisher joins", time.Now().Format("15:04:05.000"))
	r2 := c.republisher(t, nil) // a rebalance: r1 revokes some partitions
	select {
	case <-revoked:
	case <-time.After(30 * time.Second):
		t.Fatal("no revocation within 30s of the second republisher joining")
	}
	close(stop)
	<-produced
	pubMu.Lock()
	n := len(pub)
	pubMu.Unlock()
	s.waitFor(t, 60*time.Second, "every record", func(s *sink) bool { return len(s.got) >= n })
	dups, lateness := s.check(t, pub)
	t.Logf("%s; duplicates %d", latenessLine(lateness), dups)
	r2.stop(t)
	r1.stop(t)
	log.mu.Lock()
	defer log.mu.Unlock()
	t.Logf("%d partition commits seen by the cluster", log.n)
	for _, b := range log.back {
		t.Errorf("committed offset went backwards: %s", b)
	}
}

// revokeSignal calls fn for every rebalance.
type revokeSignal struct {
	kafkadelay.BaseObserver
	fn func(kafkadelay.Rebalance)
}

func (o *revokeSignal) Rebalanced(ev kafkadelay.Rebalance) { o.fn(ev) }
