package kafkadelay_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

func TestLadderRoute(t *testing.T) {
	l := kafkadelay.RecommendedLadder("d.")
	cases := []struct {
		rem  time.Duration
		want string
		ok   bool
	}{
		{500 * time.Millisecond, "d.1s", false},
		{time.Second, "d.1s", true},
		{4999 * time.Millisecond, "d.1s", true},
		{5 * time.Second, "d.5s", true},
		{59 * time.Second, "d.15s", true},
		{90 * time.Minute, "d.1h", true},
		{30 * 24 * time.Hour, "d.24h", true},
	}
	for _, tc := range cases {
		b, ok := l.Route(tc.rem)
		if b.Topic != tc.want || ok != tc.ok {
			t.Errorf("Route(%v) = %s %v, want %s %v", tc.rem, b.Topic, ok, tc.want, tc.ok)
		}
	}
	if got := strings.Join(l.Topics(), " "); got != "d.1s d.5s d.15s d.1m d.5m d.15m d.1h d.6h d.24h" {
		t.Errorf("topics %s", got)
	}
}

func TestNewLadderErrors(t *testing.T) {
	b := func(d time.Duration, topic string) kafkadelay.Bucket {
		return kafkadelay.Bucket{Delay: d, Topic: topic}
	}
	cases := []struct {
		buckets []kafkadelay.Bucket
		want    string
	}{
		{nil, "at least one bucket"},
		{[]kafkadelay.Bucket{b(0, "a")}, "must be at least 1ms"},
		{[]kafkadelay.Bucket{b(-time.Second, "a")}, "must be at least 1ms"},
		{[]kafkadelay.Bucket{b(time.Second, "a"), b(time.Second, "b")}, "the same delay"},
		{[]kafkadelay.Bucket{b(2*time.Second, "a"), b(time.Second, "b")}, "not in increasing order"},
		{[]kafkadelay.Bucket{b(time.Second, "a"), b(2*time.Second, "a")}, "used by two buckets"},
		{[]kafkadelay.Bucket{b(time.Second, "")}, "empty topic name"},
		{[]kafkadelay.Bucket{b(time.Second, "..")}, `topic name ".."`},
	}
	for _, tc := range cases {
		_, err := kafkadelay.NewLadder(tc.buckets...)
		if err == nil || !errors.Is(err, kafkadelay.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewLadder(%v) = %v, want an ErrInvalid saying %q", tc.buckets, err, tc.want)
		}
	}
}

// Route picks the largest bucket <= the remaining delay, the smallest for
// less than it, and the destination for a due instant that has passed;
// the user's key, value and headers are kept, ontime's added, the record
// given is not changed.
func TestProducerRoute(t *testing.T) {
	l := kafkadelay.RecommendedLadder("d.")
	p, err := kafkadelay.NewProducer(mustClient(t), l)
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: "orders", Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "b", Value: []byte("2")}, {Key: "a", Value: []byte("1")}, {Key: kafkadelay.HeaderDue, Value: []byte("stale")}}}
	now := time.Now()
	for _, tc := range []struct {
		due  time.Time
		want string
	}{
		{now.Add(-time.Hour), "orders"},
		{now.Add(300 * time.Millisecond), "d.1s"},
		{now.Add(7 * time.Second), "d.5s"},
		{now.Add(2 * time.Hour), "d.1h"},
		{now.Add(100 * 24 * time.Hour), "d.24h"},
	} {
		out, err := p.Route(rec, tc.due)
		if err != nil {
			t.Fatal(err)
		}
		if out.Topic != tc.want {
			t.Errorf("due in %v: routed to %s, want %s", time.Until(tc.due).Round(time.Second), out.Topic, tc.want)
		}
		if string(out.Key) != "k" || string(out.Value) != "v" {
			t.Errorf("key/value changed: %q %q", out.Key, out.Value)
		}
		if out.Headers[0].Key != "b" || out.Headers[1].Key != "a" {
			t.Errorf("user headers reordered: %v", out.Headers)
		}
		m, err := kafkadelay.ParseMeta(out.Headers)
		if err != nil {
			t.Fatal(err)
		}
		if m.Destination != "orders" || m.Due.Before(tc.due.Truncate(time.Millisecond)) || m.Due.Sub(tc.due) >= time.Millisecond {
			t.Errorf("meta %+v for due %v", m, tc.due)
		}
	}
	if len(rec.Headers) != 3 || rec.Topic != "orders" {
		t.Errorf("Route changed the record given: %+v", rec)
	}
	// A due instant with sub-millisecond precision is rounded up.
	due := time.UnixMilli(now.Add(time.Hour).UnixMilli()).Add(300 * time.Microsecond)
	out, _ := p.Route(rec, due)
	if got, _ := strconv.ParseInt(headerValue(out, kafkadelay.HeaderDue), 10, 64); got != due.UnixMilli()+1 {
		t.Errorf("due %v written as %d ms, want %d", due, got, due.UnixMilli()+1)
	}

	for _, tc := range []struct {
		rec  *kgo.Record
		due  time.Time
		want string
	}{
		{nil, now, "nil record"},
		{&kgo.Record{Topic: ""}, now, "empty topic name"},
		{&kgo.Record{Topic: "d.5s"}, now, "is a bucket topic"},
		{&kgo.Record{Topic: "orders"}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "out of range"},
		{&kgo.Record{Topic: "orders"}, time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), "out of range"},
	} {
		if _, err := p.Route(tc.rec, tc.due); err == nil || !errors.Is(err, kafkadelay.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Route(%+v) = %v, want %q", tc.rec, err, tc.want)
		}
	}
}

func mustClient(t *testing.T) *kgo.Client {
	t.Helper()
	// No broker is contacted by Route.
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestParseMeta(t *testing.T) {
	h := func(kv ...string) []kgo.RecordHeader {
		var hs []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	m, err := kafkadelay.ParseMeta(h("x", "y", kafkadelay.HeaderDue, "1700000000123", kafkadelay.HeaderDestination, "t.1",
		kafkadelay.HeaderID, "id", kafkadelay.HeaderTimestamp, "1700000000000"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Due.UnixMilli() != 1700000000123 || m.Destination != "t.1" || m.ID != "id" || m.Timestamp.UnixMilli() != 1700000000000 {
		t.Errorf("%+v", m)
	}
	for _, tc := range []struct {
		hs   []kgo.RecordHeader
		want string
	}{
		{h(kafkadelay.HeaderDue, "+1", kafkadelay.HeaderDestination, "t", kafkadelay.HeaderID, "i"), "not a decimal"},
		{h(kafkadelay.HeaderDue, " 1", kafkadelay.HeaderDestination, "t", kafkadelay.HeaderID, "i"), "not a decimal"},
		{h(kafkadelay.HeaderDue, "", kafkadelay.HeaderDestination, "t", kafkadelay.HeaderID, "i"), "empty"},
		{h(kafkadelay.HeaderDue, "253402300800000", kafkadelay.HeaderDestination, "t", kafkadelay.HeaderID, "i"), "out of range"},
		{h(kafkadelay.HeaderDue, "1", kafkadelay.HeaderDestination, "t", kafkadelay.HeaderID, ""), "want 1 to 255"},
		{h(kafkadelay.HeaderDue, "1", kafkadelay.HeaderDestination, "t", kafkadelay.HeaderID, "i", kafkadelay.HeaderTimestamp, "x"), "ontime-timestamp-ms"},
		{h(kafkadelay.HeaderDue, "1", kafkadelay.HeaderID, "i"), "ontime-destination is missing"},
		{h(kafkadelay.HeaderDue, "1", kafkadelay.HeaderDestination, "t", kafkadelay.HeaderDestination, "u", kafkadelay.HeaderID, "i"), "appears twice"},
	} {
		if _, err := kafkadelay.ParseMeta(tc.hs); err == nil || !errors.Is(err, kafkadelay.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMeta(%v) = %v, want %q", tc.hs, err, tc.want)
		}
	}
}
