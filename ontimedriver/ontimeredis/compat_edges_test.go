package ontimeredis_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
)

// TestCompatPublishWakesPastPythonHead: a Python timer that is due but
// unclaimed sits at the head of a topic (Python publishers send no
// wake-up, and the Go worker sleeps until its poll interval). An ontime
// publish due at once must wake the Go worker, which then takes both. It
// used to notify only when the new timer was earlier than the head, so
// both waited for the poll (10 s here).
func TestCompatPublishWakesPastPythonHead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newCompat(t, "")
	const topic = "wake-py"
	got := make(chan string, 10)
	claims := &claimCounter{}
	wc, err := ontime.NewClient(e.d, &ontime.Config{Logger: quiet, Hooks: []any{claims}})
	if err != nil {
		t.Fatal(err)
	}
	w := ontime.NewWorker(wc, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, topic, func(ctx context.Context, m *ontime.Message[string]) error {
		got <- m.ID
		return nil
	}, &ontime.TopicOptions{PollInterval: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	// The worker found the topic empty (its first claim returned, after
	// it subscribed) and sleeps for its poll interval: a timer it gets
	// within 3 s from here on came by a wake-up.
	wait.For(t, 20*time.Second, func() bool { return claims.get(topic) >= 1 }, "the worker's first claim")
	score := float64(time.Now().Add(-time.Second).UnixMicro()) / 1e6 // due a second ago
	if _, err := e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, e.timeline+":"+topic, redis.Z{Score: score, Member: "py-1"})
		p.HSet(ctx, e.payloads+":"+topic, "py-1", unhex(t, vectorA))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Publish(ctx, topic, "go", ontime.WithID("go-1")); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	timeout := time.After(3 * time.Second)
	for len(seen) < 2 {
		select {
		case id := <-got:
			seen[id] = true
		case <-timeout:
			t.Fatalf("delivered %v within 3s of the publish, want py-1 and go-1 (the worker was not woken; its poll interval is 10s)", seen)
		}
	}
}

// TestCompatHandleAnyPythonBodies: a Handle[any] handler receives the bodies
// a Python publisher wrote as Python's own Any handler does: text as a
// string (it was refused as JSON and dead-lettered), JSON as its value, raw
// bytes as []byte.
func TestCompatHandleAnyPythonBodies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newCompat(t, "")
	const topic = "any-py"
	type body struct {
		id   string
		data any
	}
	got := make(chan body, 10)
	w := ontime.NewWorker(e.client, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, topic, func(ctx context.Context, m *ontime.Message[any]) error {
		got <- body{m.ID, m.Body}
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	score := float64(time.Now().UnixMicro()) / 1e6
	if _, err := e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for id, vec := range map[string]string{"text": vectorA, "json": vectorB, "raw": vectorC} {
			p.ZAdd(ctx, e.timeline+":"+topic, redis.Z{Score: score, Member: id})
			p.HSet(ctx, e.payloads+":"+topic, id, unhex(t, vec))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	want := map[string]any{
		"text": "hello",
		"json": map[string]any{"order_id": 42.0, "status": "due"},
		"raw":  []byte{0x00, 0xff},
	}
	for range want {
		select {
		case b := <-got:
			if !reflect.DeepEqual(b.data, want[b.id]) {
				t.Errorf("%s: Body %#v, want %#v", b.id, b.data, want[b.id])
			}
		case <-time.After(5 * time.Second):
			t.Fatal("not every Python timer was delivered")
		}
	}
}

// TestCompatWakeBehindPythonHead: a Python timer that is not due yet sits
// at the head of a topic, published after the Go workers last looked (a
// Python publisher sends no wake-up, so they know nothing of it and sleep
// until their poll). A Go publish due after it, and a Go retry due after
// it, must still wake them, with their own due time: the script cannot
// tell which timers the workers know. It used to send a wake-up only when
// the new timer came before the head (or the head was due), so such a Go
// timer waited for the poll (7.7 s late with PollInterval 25 s against
// the real Python library).
func TestCompatWakeBehindPythonHead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newCompat(t, "")
	const topic = "wake-behind-py"
	wake, cancel, err := e.d.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	next := func(what string, want time.Time) {
		t.Helper()
		select {
		case at := <-wake:
			if d := at.Sub(want); d < -time.Second || d > time.Second {
				t.Fatalf("%s: wake-up for %v, want %v", what, at, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no wake-up within 5s", what)
		}
	}
	pythonAt := func(id string, due time.Time) {
		t.Helper()
		score := float64(due.UnixMicro())/1e6 + 0.000123 // Python's microseconds
		if _, err := e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZAdd(ctx, e.timeline+":"+topic, redis.Z{Score: score, Member: id})
			p.HSet(ctx, e.payloads+":"+topic, id, unhex(t, vectorA))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	// A Go timer due now, claimed, and the Python timer published after
	// the claim, due in an hour.
	if _, err := e.client.Publish(ctx, topic, "go", ontime.WithID("go-0")); err != nil {
		t.Fatal(err)
	}
	next("the first publish", time.Now())
	var claimed []ontimedriver.ClaimedTimer
	wait.For(t, 5*time.Second, func() bool {
		r, err := e.d.Claim(ctx, topic, 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		claimed = r.Timers
		return len(claimed) == 1
	}, "go-0 to be claimable")
	pythonAt("py-1", time.Now().Add(time.Hour))

	// A Go publish due after the Python head wakes the workers.
	due := time.Now().Add(2 * time.Hour)
	if _, err := e.client.Publish(ctx, topic, "go", ontime.WithID("go-1"), ontime.At(due)); err != nil {
		t.Fatal(err)
	}
	next("a Go publish behind a Python timer that is not due", due)

	// So does a Go retry due after it.
	errs, err := e.d.Settle(ctx, topic, []ontimedriver.Settlement{{
		Lease: ontimedriver.Lease{ID: claimed[0].ID, Token: claimed[0].Token},
		Kind:  ontimedriver.Retry, Delay: 90 * time.Minute, Error: "boom",
	}})
	if err != nil || errs[0] != nil {
		t.Fatalf("Settle: %v %v", err, errs)
	}
	next("a Go retry behind a Python timer that is not due", time.Now().Add(90*time.Minute))
}
