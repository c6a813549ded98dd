package ontime_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/schedule"
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
	_ ontimedriver.RecurringLister    = (*capDriver)(nil)
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
	ops   map[string]*atomic.Int64 // calls by op, for the ops listed at creation
}

func newEveryHook(ops ...string) *everyHook {
	h := &everyHook{recorder: newRecorder(), ops: map[string]*atomic.Int64{}}
	for _, op := range ops {
		h.ops[op] = new(atomic.Int64)
	}
	return h
}

func (h *everyHook) StoreCall(_ context.Context, c ontime.StoreCall) {
	h.calls.Add(1)
	if n, ok := h.ops[c.Op]; ok {
		n.Add(1)
	}
}

// TestCapabilitiesSurviveWrapping: a store wrapped by the Client for its
// StoreCallHooks, and also by a user's wrapper first, keeps every optional
// interface it has: claim-ahead (SlowClaims), the topic index
// (HandleTopics), its repair at start (TopicIndexRepairer), the lenient
// decoding of legacy payloads (LegacyPayloads) and the list of recurring
// timers (RecurringLister, used by Client.ListRecurring).
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
	hook := newEveryHook("list_recurring")
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

	// RecurringLister: ListRecurring reads the schedule alone, not the
	// plain timer due before it (the fallback would scan both), and
	// reports the call as "list_recurring".
	if _, err := c.Publish(ctx, "sched", "plain", ontime.In(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PublishRecurring(ctx, "sched", "hourly", schedule.Every(time.Hour), "tick"); err != nil {
		t.Fatal(err)
	}
	rp, err := c.ListRecurring(ctx, "sched", ontime.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rp.Timers) != 1 || rp.Timers[0].ID != "hourly" || rp.Scanned != 1 || rp.NextCursor != "" {
		t.Errorf("ListRecurring: %d timers, scanned %d, cursor %q; want hourly alone, scanned 1 (RecurringLister hidden?)", len(rp.Timers), rp.Scanned, rp.NextCursor)
	}
	if hook.ops["list_recurring"].Load() == 0 {
		t.Error("ListRecurring was not reported as a list_recurring store call")
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

// noLister is a store that keeps recurring timers but cannot list them:
// the embedded store seen through its Driver and Recurring methods only.
type noLister struct {
	ontimedriver.Driver
	ontimedriver.Recurring
}

// TestListRecurringFallback: without a RecurringLister, ListRecurring
// walks the topic's timers in due order, a bounded number of List pages
// per call, and still lists every schedule once by paging to the end.
func TestListRecurringFallback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := openBolt(t)
	c, err := ontime.NewClient(noLister{store, store}, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ontimedriver.As[ontimedriver.RecurringLister](noLister{store, store}); ok {
		t.Fatal("noLister exposes a RecurringLister")
	}
	// 25 plain timers due first, then two schedules (first ticks in 2h and
	// 4h), with 5 plain timers between them
	plain := make([]ontime.Timer, 30)
	for i := range plain {
		at := time.Minute
		if i >= 25 {
			at = 3 * time.Hour
		}
		plain[i] = ontime.Timer{ID: fmt.Sprintf("p%02d", i), Delay: at, Body: "x"}
	}
	if _, err := c.PublishBatch(ctx, "fb", plain); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, first := range []time.Duration{4 * time.Hour, 2 * time.Hour} {
		if _, err := c.PublishRecurring(ctx, "fb", "in-"+first.String(), schedule.EveryFrom(24*time.Hour, now.Add(first)), "tick"); err != nil {
			t.Fatal(err)
		}
	}
	// limit 2: 10 List pages of 2 read 20 timers and find no schedule
	p, err := c.ListRecurring(ctx, "fb", ontime.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Timers) != 0 || p.Scanned != 20 || p.NextCursor == "" {
		t.Fatalf("first page: %d timers, scanned %d, cursor %q; want none, 20, a cursor", len(p.Timers), p.Scanned, p.NextCursor)
	}
	var ids []string
	scanned := p.Scanned
	for pages := 1; p.NextCursor != ""; pages++ {
		if pages > 20 {
			t.Fatal("no last page")
		}
		if p, err = c.ListRecurring(ctx, "fb", ontime.ListOptions{Limit: 2, Cursor: p.NextCursor}); err != nil {
			t.Fatal(err)
		}
		scanned += p.Scanned
		for _, ti := range p.Timers {
			if ti.Recurring == nil {
				t.Errorf("ListRecurring listed plain timer %s", ti.ID)
			}
			ids = append(ids, ti.ID)
		}
	}
	if fmt.Sprint(ids) != "[in-2h0m0s in-4h0m0s]" || scanned != 32 {
		t.Errorf("fallback walk: %v, scanned %d; want both schedules in due order, 32 timers scanned", ids, scanned)
	}
	if _, err := c.ListRecurring(ctx, "fb", ontime.ListOptions{Before: time.Now()}); !errors.Is(err, ontime.ErrInvalid) {
		t.Errorf("ListRecurring with Before: %v, want ErrInvalid", err)
	}
}
