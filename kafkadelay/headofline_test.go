package kafkadelay_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// holLadder has a long top rung, so that a record waiting in it would hold
// up what is behind it for seconds.
func holLadder(t testing.TB) *kafkadelay.Ladder {
	t.Helper()
	l, err := kafkadelay.NewLadder(
		kafkadelay.Bucket{Delay: 200 * time.Millisecond, Topic: "delay-200ms"},
		kafkadelay.Bucket{Delay: time.Second, Topic: "delay-1s"},
		kafkadelay.Bucket{Delay: 10 * time.Second, Topic: "delay-10s"},
	)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// produceTo produces a record for dest, due at due, to the given bucket
// topic and partition, as a hand-written producer would.
func produceTo(t *testing.T, cl *kgo.Client, p *kafkadelay.Producer, bucket string, partition int32, dest string, due time.Time, n int) published {
	t.Helper()
	return produceAt(t, cl, p, bucket, partition, dest, due, time.Time{}, n)
}

// produceAt is produceTo with the record's timestamp ts (zero: now).
func produceAt(t *testing.T, cl *kgo.Client, p *kafkadelay.Producer, bucket string, partition int32, dest string, due, ts time.Time, n int) published {
	t.Helper()
	rec, err := p.Route(&kgo.Record{Topic: dest, Value: []byte("v" + strconv.Itoa(n))}, due)
	if err != nil {
		t.Fatal(err)
	}
	rec.Topic, rec.Partition = bucket, partition
	if !ts.IsZero() {
		rec.Timestamp = ts
	}
	if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dueMs, _ := strconv.ParseInt(headerValue(rec, kafkadelay.HeaderDue), 10, 64)
	return published{id: headerValue(rec, kafkadelay.HeaderID), due: time.UnixMilli(dueMs)}
}

// Record A sits in the 10 s bucket, due in 12 s (where the ladder puts
// it); record B behind it in the same partition is due in 1 s (a producer
// that rounds up, or a hand-written one, put it there). B must not wait
// for A: it is moved on at once and delivered on time.
func TestNoHeadOfLineBlocking(t *testing.T) {
	c := newClusterWith(t, holLadder(t))
	s := c.sink(t)
	cl := c.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	p, err := kafkadelay.NewProducer(cl, c.ladder)
	if err != nil {
		t.Fatal(err)
	}
	r := c.republisher(t, nil)
	now := time.Now()
	a := produceTo(t, cl, p, "delay-10s", 0, "orders", now.Add(12*time.Second), 0)
	b := produceTo(t, cl, p, "delay-10s", 0, "orders", now.Add(time.Second), 1)
	s.waitFor(t, 30*time.Second, "record B", func(s *sink) bool { return len(s.got[b.id]) > 0 })
	s.mu.Lock()
	lateB := s.got[b.id][0].received.Sub(b.due)
	s.mu.Unlock()
	t.Logf("B (due in 1s, behind A due in 12s, both in the 10s bucket) arrived %v after its due instant", lateB.Round(time.Millisecond))
	if lateB > 3*time.Second {
		t.Errorf("B was held up behind A: %v late", lateB)
	}
	s.waitFor(t, 30*time.Second, "record A", func(s *sink) bool { return len(s.got[a.id]) > 0 })
	dups, lateness := s.check(t, map[string]published{a.id: a, b.id: b})
	t.Logf("%s; duplicates %d", latenessLine(lateness), dups)
	var moved int64
	for _, st := range r.Stats() {
		moved += st.OutOfOrder
	}
	if moved != 1 {
		t.Errorf("OutOfOrder = %d, want 1 (record B)", moved)
	}
	r.stop(t)
}

// Two producers whose clocks disagree by 5 s write to the same 10 s bucket
// partition: A (clock right) due in 12 s, then B (clock 5 s behind, so its
// timestamp says it has already waited 5 s) due in 6 s. Both belong in the
// bucket, but B must leave it first: A is moved on at once and B arrives
// on time.
func TestNoHeadOfLineBlockingClockSkew(t *testing.T) {
	c := newClusterWith(t, holLadder(t))
	s := c.sink(t)
	cl := c.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	p, err := kafkadelay.NewProducer(cl, c.ladder)
	if err != nil {
		t.Fatal(err)
	}
	r := c.republisher(t, nil)
	now := time.Now()
	a := produceAt(t, cl, p, "delay-10s", 1, "orders", now.Add(12*time.Second), time.Time{}, 0)
	b := produceAt(t, cl, p, "delay-10s", 1, "orders", now.Add(6*time.Second), now.Add(-5*time.Second), 1)
	s.waitFor(t, 30*time.Second, "records A and B", func(s *sink) bool { return len(s.got[a.id]) > 0 && len(s.got[b.id]) > 0 })
	s.mu.Lock()
	lateB := s.got[b.id][0].received.Sub(b.due)
	s.mu.Unlock()
	t.Logf("B arrived %v after its due instant", lateB.Round(time.Millisecond))
	if lateB > 2*time.Second {
		t.Errorf("B was held up behind A: %v late", lateB)
	}
	dups, _ := s.check(t, map[string]published{a.id: a, b.id: b})
	if dups != 0 {
		t.Errorf("%d duplicates", dups)
	}
	var moved int64
	for _, st := range r.Stats() {
		moved += st.OutOfOrder
	}
	if moved != 1 {
		t.Errorf("OutOfOrder = %d, want 1 (record A)", moved)
	}
	r.stop(t)
}

// Producers that round up ("the smallest bucket at least the delay") and
// producers that follow the ladder share the bucket topics: every record
// is delivered at its instant, none early, and the ones that were rounded
// up are not held behind the others.
func TestRoundUpProducers(t *testing.T) {
	c := newClusterWith(t, holLadder(t))
	s := c.sink(t)
	r := c.republisher(t, nil)
	down, err := kafkadelay.NewProducer(c.client(t), c.ladder)
	if err != nil {
		t.Fatal(err)
	}
	up, err := kafkadelay.NewProducer(c.client(t), c.ladder, kafkadelay.RoundUp())
	if err != nil {
		t.Fatal(err)
	}
	pub := make(map[string]published)
	upIDs := make(map[string]bool)
	ctx := context.Background()
	start := time.Now()
	const n = 600
	for i := 0; i < n; i++ {
		var (
			p     = down
			delay = 10*time.Second + time.Duration(i%20)*100*time.Millisecond // waits in the 10 s bucket
		)
		if i%2 == 1 {
			p = up
			delay = time.Duration(100+(i*37)%8000) * time.Millisecond // rounded up into the 1 s or 10 s bucket
		}
		due := time.Now().Add(delay)
		rec := &kgo.Record{Topic: destinations[i%2], Key: []byte("k" + strconv.Itoa(i%7)), Value: []byte("v" + strconv.Itoa(i))}
		id, err := p.PublishAt(ctx, rec, due)
		if err != nil {
			t.Fatal(err)
		}
		pub[id] = published{id: id, due: time.UnixMilli(due.Add(time.Millisecond - 1).UnixMilli())}
		if p == up {
			upIDs[id] = true
		}
	}
	t.Logf("published %d records in %v", n, time.Since(start).Round(time.Millisecond))
	s.waitFor(t, 60*time.Second, "every record", func(s *sink) bool { return len(s.got) >= n })
	dups, lateness := s.check(t, pub)
	t.Logf("all: %s; duplicates %d", latenessLine(lateness), dups)
	var upLate []time.Duration
	s.mu.Lock()
	for id := range upIDs {
		upLate = append(upLate, s.got[id][0].received.Sub(pub[id].due))
	}
	s.mu.Unlock()
	slices.Sort(upLate)
	t.Logf("rounded up: %s", latenessLine(upLate))
	if p99 := pct(upLate, 0.99); p99 > time.Second {
		t.Errorf("records rounded up: p99 lateness %v, want at most 1s (held behind records that wait)", p99)
	}
	var moved int64
	for _, st := range r.Stats() {
		moved += st.OutOfOrder
	}
	t.Logf("moved out of order: %d", moved)
	if moved == 0 {
		t.Error("no record was moved out of order")
	}
	r.stop(t)
}
