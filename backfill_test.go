package ontime_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/schedule"
)

// TestBackfill backfills a past range of a recurring timer on the embedded
// store: each tick in (from, to] is delivered once, as a one-shot timer
// with the recurring timer's body and headers and the tick's instant in
// header ontime-tick; a backfill repeated while the ticks are pending
// publishes none twice; bad ranges and a plain timer are refused.
func TestBackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, err := ontime.NewClient(openBolt(t), &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// a schedule far from its next tick: only backfilled ticks run
	sched, err := schedule.Cron("0 9 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.PublishRecurring(ctx, "reports", "daily", sched, "build",
		ontime.WithHeader("team", "ops"), ontime.WithCorrelationID("corr-1")); err != nil {
		t.Fatal(err)
	}
	// (from, to] over a daylight-saving change: 2026-03-28 and 03-29 at
	// 09:00 Berlin are 08:00 and 07:00 UTC
	from := time.Date(2026, 3, 27, 9, 0, 0, 0, time.UTC) // after 03-27's tick (08:00 UTC)
	to := time.Date(2026, 3, 29, 7, 0, 0, 0, time.UTC)   // 03-29's tick, included
	want := []time.Time{time.Date(2026, 3, 28, 8, 0, 0, 0, time.UTC), to}

	res, err := client.Backfill(ctx, "reports", "daily", from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Ticks) != 2 || !res.Ticks[0].Equal(want[0]) || !res.Ticks[1].Equal(want[1]) || res.Published != 2 || res.Existing != 0 {
		t.Fatalf("Backfill = %+v, want ticks %v, 2 published", res, want)
	}
	// again, while pending: nothing twice
	res, err = client.Backfill(ctx, "reports", "daily", from, to)
	if err != nil || res.Published != 0 || res.Existing != 2 {
		t.Fatalf("Backfill again = %+v, %v; want 2 existing", res, err)
	}
	ti, err := client.Get(ctx, "reports", ontime.BackfillID("daily", want[0]))
	if err != nil {
		t.Fatal(err)
	}
	if string(ti.Body) != "build" || ti.ContentType != "text/plain" || ti.Headers["team"] != "ops" || ti.CorrelationID != "corr-1" || ti.Recurring != nil {
		t.Errorf("backfilled tick = %+v", ti)
	}

	type got struct {
		id, tick, body string
	}
	var (
		mu        sync.Mutex
		delivered []got
	)
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	err = ontime.Handle(w, "reports", func(ctx context.Context, m *ontime.Message[string]) error {
		mu.Lock()
		delivered = append(delivered, got{m.ID, m.Headers[ontime.TickHeader], m.Body})
		mu.Unlock()
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	n := func() int { mu.Lock(); defer mu.Unlock(); return len(delivered) }
	wait.For(t, 30*time.Second, func() bool { return n() >= 2 }, "2 backfilled ticks delivered")
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	left, err := client.List(ctx, "reports", ontime.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	sort.Slice(delivered, func(i, j int) bool { return delivered[i].tick < delivered[j].tick })
	if len(delivered) != 2 {
		t.Fatalf("delivered %v", delivered)
	}
	for i, d := range delivered {
		if d.id != ontime.BackfillID("daily", want[i]) || d.tick != want[i].Format(time.RFC3339Nano) || d.body != "build" {
			t.Errorf("delivery %d = %+v, want tick %v", i, d, want[i])
		}
	}
	mu.Unlock()
	// the backfilled ticks are gone, the recurring timer stays armed
	if len(left.Timers) != 1 || left.Timers[0].ID != "daily" || left.Timers[0].Recurring == nil {
		t.Errorf("left in the topic: %+v, want the recurring timer alone", left.Timers)
	}

	// refused
	now := time.Now()
	plain, err := client.Publish(ctx, "reports", "x", ontime.In(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		id       string
		from, to time.Time
		want     error
	}{
		{"to not after from", "daily", to, to, ontime.ErrInvalid},
		{"to in the future", "daily", from, now.Add(time.Hour), ontime.ErrInvalid},
		{"more than MaxBackfill ticks", "daily", now.AddDate(-2, 0, 0), now, ontime.ErrInvalid},
		{"a plain timer", plain, from, to, ontime.ErrNotFound},
		{"no such timer", "nope", from, to, ontime.ErrNotFound},
	} {
		if _, err := client.Backfill(ctx, "reports", c.id, c.from, c.to); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
}
