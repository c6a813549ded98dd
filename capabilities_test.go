package ontime_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// capDriver is the embedded store (slow claims, a topic index) with the
// two optional interfaces it lacks: it says it accepts legacy payloads and
// that its index needs repairs, and counts the repairs.
type capDriver struct {
	*ontimebolt.Driver
	repairs atomic.Int64
}

func (d *capDriver) AcceptsLegacyPayloads() bool { return true }
func (d *capDriver) NeedsIndexRepair() bool      { return true }
func (d *capDriver) SyncTopicIndex(context.Context) error {
	d.repairs.Add(1)
	return nil
}

var (
	_ ontimedriver.LegacyPayloads     = (*capDriver)(nil)
	_ ontimedriver.SlowClaims         = (*capDriver)(nil)
	_ ontimedriver.TopicIndex         = (*capDriver)(nil)
	_ ontimedriver.TopicIndexRepairer = (*capDriver)(nil)
)

// passThrough is a user's wrapper: it embeds the Driver and forwards none
// of the optional interfaces by hand.
type passThrough struct{ ontimedriver.Driver }

func (p passThrough) Unwrap() ontimedriver.Driver { return p.Driver }

// everyHook is a hook of every kind: the recorder's four and StoreCall.
type everyHook struct {
	*recorder
	calls atomic.Int64
}

func (h *everyHook) StoreCall(context.Context, ontime.StoreCall) { h.calls.Add(1) }

// TestCapabilitiesSurviveWrapping: a store wrapped by the Client for its
// StoreCallHooks, and also by a user's wrapper first, keeps every optional
// interface it has: claim-ahead (SlowClaims), the topic index
// (HandleTopics), its repair at start (TopicIndexRepairer) and the lenient
// decoding of legacy payloads (LegacyPayloads).
func TestCapabilitiesSurviveWrapping(t *testing.T) {
	t.Parallel()
	for _, user := range []bool{false, true} {
		name := "hooks"
		if user {
			name = "user-wrapper-and-hooks"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store := &capDriver{Driver: openBolt(t)}
			var d ontimedriver.Driver = store
			if user {
				d = passThrough{store}
			}
			testCapabilities(t, store, d)
		})
	}
}

func testCapabilities(t *testing.T, store *capDriver, d ontimedriver.Driver) {
	ctx := context.Background()
	hook := &everyHook{recorder: newRecorder()}
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet, Hooks: []any{hook}})
	if err != nil {
		t.Fatal(err)
	}

	// LegacyPayloads: a raw body another program wrote decodes (leniently)
	// instead of being reported undecodable.
	if _, err := store.Schedule(ctx, "raw", []ontimedriver.NewTimer{{ID: "r", Delay: time.Hour, Payload: []byte("plain text")}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	ti, err := c.Get(ctx, "raw", "r")
	if err != nil {
		t.Fatal(err)
	}
	if ti.DecodeError != "" || string(ti.Body) != "plain text" {
		t.Errorf("legacy payload: body %q, decode error %q; want the raw body decoded leniently", ti.Body, ti.DecodeError)
	}

	// TopicIndex: HandleTopics accepts the store.
	w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
	viaIndex := make(chan string, 1)
	if err := ontime.HandleTopics(w, "caps-*", func(_ context.Context, m *ontime.Message[string]) error {
		viaIndex <- m.Topic
		return nil
	}, nil); err != nil {
		t.Fatalf("HandleTopics on a wrapped store with a topic index: %v", err)
	}
	// SlowClaims: claim-ahead is on by default, so with one handler slot
	// blocked a worker holds 1 + ClaimBatch timers leased.
	const batch = 2
	release := make(chan struct{})
	if err := ontime.Handle(w, "ahead", func(ctx context.Context, _ *ontime.Message[[]byte]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: 1, ClaimBatch: batch}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PublishBatch(ctx, "ahead", make([]ontime.Timer, 5)); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w, ctx)
	defer close(release)

	if _, err := c.Publish(ctx, "caps-1", "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case topic := <-viaIndex:
		if topic != "caps-1" {
			t.Errorf("HandleTopics delivered topic %q, want caps-1", topic)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("HandleTopics delivered nothing")
	}
	// TopicIndexRepairer: the pattern loop repaired the index before its
	// first look-up, which found caps-1.
	if n := store.repairs.Load(); n == 0 {
		t.Error("the topic index was not repaired at start: TopicIndexRepairer is hidden")
	}

	var leased int64
	wait.For(t, 10*time.Second, func() bool {
		cnt, err := c.Count(ctx, "ahead")
		if err != nil {
			t.Fatal(err)
		}
		if leased = cnt.Leased; leased > 1+batch {
			t.Fatalf("leased %d with one handler slot, want %d", leased, 1+batch)
		}
		return leased == 1+batch
	}, "%d leased with one handler slot (claim-ahead on): %s", 1+batch, func() string { return fmt.Sprint(leased) })
	if hook.calls.Load() == 0 {
		t.Error("the StoreCallHook saw no call")
	}
}
