package kafkadelay_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ontime-go/ontime/kafkadelay"
)

// failures tracks the records whose produce failed and has not succeeded
// since, by bucket partition.
type failures struct {
	kafkadelay.BaseObserver
	mu      sync.Mutex
	failing map[string]map[int64]bool // "topic/partition" -> offsets
	errors  int
}

func key(topic string, p int32) string { return topic + "/" + string(rune('0'+p)) }

func (f *failures) ProduceFailed(ev kafkadelay.ProduceFailure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors++
	k := key(ev.Source, ev.Partition)
	if f.failing[k] == nil {
		f.failing[k] = make(map[int64]bool)
	}
	f.failing[k][ev.Offset] = true
}

func (f *failures) Released(ev kafkadelay.Release) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.failing[key(ev.Source, ev.Partition)], ev.Offset)
}

// minFailing returns the smallest failing offset of a partition, or -1.
func (f *failures) minFailing(k string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := int64(-1)
	for o := range f.failing[k] {
		if m < 0 || o < m {
			m = o
		}
	}
	return m
}

// Produces to a destination fail for a while (kfake answers them with an
// error): they are retried, the partitions stay paused, no offset is ever
// committed past a record whose produce has not succeeded, and once the
// fault is removed everything is delivered, none early.
func TestProduceFailuresRetried(t *testing.T) {
	c := newCluster(t)
	s := c.sink(t)
	obs := &failures{failing: make(map[string]map[int64]bool)}
	r := c.republisher(t, func(cfg *kafkadelay.Config) {
		cfg.Observer = obs
		cfg.RetryMin, cfg.RetryMax = 20*time.Millisecond, 200*time.Millisecond
	})
	// Records are due from 3 s on; the fault is installed once they are
	// published (the test's own producer must not meet it), before most
	// are due: every produce to "orders" fails until it is removed.
	const n = 6000
	rng := rand.New(rand.NewPCG(7, 8))
	pub := publishMany(t, c, n, func(int) time.Time {
		return time.Now().Add(3*time.Second + time.Duration(rng.IntN(3000))*time.Millisecond)
	})
	fault := c.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Produce},
		Topic: "orders",
		Err:   kerr.UnknownServerError,
		Count: -1,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := fault.Wait(ctx, 1); err != nil {
		t.Fatalf("no produce to orders reached the fault: %v", err)
	}
	for {
		obs.mu.Lock()
		seen := obs.errors
		obs.mu.Unlock()
		if seen > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the fault answered produce requests but the republisher saw no produce error")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// For 1.5 s after the first failure, check the commit invariant
	// continuously.
	violations := 0
	paused := false
	until := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(until) {
		for _, st := range r.Stats() {
			if !st.Owned || st.Committed < 0 {
				continue
			}
			if st.Paused {
				paused = true
			}
			if m := obs.minFailing(key(st.Topic, st.Partition)); m >= 0 && st.Committed > m {
				violations++
				t.Errorf("%s/%d committed at %d past the failing record at offset %d", st.Topic, st.Partition, st.Committed, m)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	hits := fault.Hits()
	fault.Remove()
	obs.mu.Lock()
	errs := obs.errors
	obs.mu.Unlock()
	if hits == 0 || errs == 0 {
		t.Fatalf("the fault answered %d produce requests and the republisher saw %d produce errors: nothing was tested", hits, errs)
	}
	if !paused {
		t.Error("no partition was paused while its produces failed")
	}

	s.waitFor(t, 60*time.Second, "every record", func(s *sink) bool { return len(s.got) >= n })
	s.drain(t, c, 60*time.Second) // late duplicates included
	dups, lateness := s.check(t, pub)
	t.Logf("fault answered %d produce requests, %d produce errors; %s; duplicates %d", hits, errs, latenessLine(lateness), dups)
	for _, st := range r.Stats() {
		if st.DeadLettered != 0 {
			t.Errorf("%s/%d dead-lettered %d records on a transient error", st.Topic, st.Partition, st.DeadLettered)
		}
	}
	r.stop(t)
}

// Malformed bucket records go to the dead-letter topic with the reason,
// and the records around them in the same partition keep flowing.
func TestMalformedRecordsDeadLettered(t *testing.T) {
	c := newCluster(t)
	s := c.sink(t)
	r := c.republisher(t, nil)
	cl := c.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	now := time.Now()
	dueMs := func(d time.Duration) []byte { return []byte(itoa(now.Add(d).UnixMilli())) }
	h := func(kv ...string) []kgo.RecordHeader {
		var hs []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	valid := func(id string) []kgo.RecordHeader {
		return h(kafkadelay.HeaderDue, string(dueMs(600*time.Millisecond)), kafkadelay.HeaderDestination, "orders", kafkadelay.HeaderID, id)
	}
	cases := []struct {
		name    string
		headers []kgo.RecordHeader
		reason  string // substring of the dead-letter reason; "" = delivered
	}{
		{"valid-1", valid("valid-1"), ""},
		{"no-headers", nil, "header ontime-due-ms is missing"},
		{"bad-due", h(kafkadelay.HeaderDue, "soon", kafkadelay.HeaderDestination, "orders", kafkadelay.HeaderID, "x1"), "not a decimal number"},
		{"due-out-of-range", h(kafkadelay.HeaderDue, "999999999999999", kafkadelay.HeaderDestination, "orders", kafkadelay.HeaderID, "x2"), "out of range"},
		{"negative-due", h(kafkadelay.HeaderDue, "-5", kafkadelay.HeaderDestination, "orders", kafkadelay.HeaderID, "x3"), "not a decimal number"},
		{"bad-destination", h(kafkadelay.HeaderDue, string(dueMs(0)), kafkadelay.HeaderDestination, "bad topic!", kafkadelay.HeaderID, "x4"), "has character"},
		{"destination-is-bucket", h(kafkadelay.HeaderDue, string(dueMs(0)), kafkadelay.HeaderDestination, "delay-1s", kafkadelay.HeaderID, "x5"), "bucket or dead-letter topic"},
		{"duplicate-due", h(kafkadelay.HeaderDue, "1", kafkadelay.HeaderDue, "2", kafkadelay.HeaderDestination, "orders", kafkadelay.HeaderID, "x6"), "appears twice"},
		{"no-id", h(kafkadelay.HeaderDue, string(dueMs(0)), kafkadelay.HeaderDestination, "orders"), "header ontime-id is missing"},
		{"unknown-destination", h(kafkadelay.HeaderDue, string(dueMs(0)), kafkadelay.HeaderDestination, "no-such-topic", kafkadelay.HeaderID, "x7"), "refused the record"},
		{"valid-2", valid("valid-2"), ""},
	}
	for i, tc := range cases {
		rec := &kgo.Record{Topic: "delay-200ms", Partition: 0, Key: []byte(tc.name), Value: []byte("body"), Headers: tc.headers}
		if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
	}
	wantDead := 0
	for _, tc := range cases {
		if tc.reason != "" {
			wantDead++
		}
	}
	s.waitFor(t, 30*time.Second, "the dead letters and the valid records", func(s *sink) bool {
		return len(s.dead) >= wantDead && len(s.got["valid-1"]) > 0 && len(s.got["valid-2"]) > 0
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	dead := make(map[string]*kgo.Record)
	for _, rec := range s.dead {
		dead[string(rec.Key)] = rec
	}
	for _, tc := range cases {
		if tc.reason == "" {
			if d := s.got[tc.name][0]; d.received.Before(now.Add(600 * time.Millisecond)) {
				t.Errorf("%s delivered early", tc.name)
			}
			continue
		}
		rec := dead[tc.name]
		if rec == nil {
			t.Errorf("%s: not dead-lettered", tc.name)
			continue
		}
		reason := headerValue(rec, kafkadelay.HeaderDeadReason)
		if !strings.Contains(reason, tc.reason) {
			t.Errorf("%s: dead-letter reason %q does not say %q", tc.name, reason, tc.reason)
		}
		if src := headerValue(rec, kafkadelay.HeaderDeadSource); !strings.HasPrefix(src, "delay-200ms/0/") {
			t.Errorf("%s: dead-letter source %q", tc.name, src)
		}
		if string(rec.Value) != "body" {
			t.Errorf("%s: dead letter's value %q, want the record's own", tc.name, rec.Value)
		}
	}
	if len(s.dead) != wantDead {
		t.Errorf("%d dead letters, want %d", len(s.dead), wantDead)
	}
	var dl int64
	for _, st := range r.Stats() {
		dl += st.DeadLettered
	}
	if dl != int64(wantDead) {
		t.Errorf("Stats count %d dead letters, want %d", dl, wantDead)
	}
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return string(b[i:])
}
