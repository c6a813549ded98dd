package ontimeredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestShardedRecurring checks how sharded topics and recurring timers
// coexist (see the package documentation, "Sharded topics"): a recurring
// timer on a sharded topic is refused with ErrUnsupported, from a sharded
// driver, and with ErrInvalid from one that does not shard the topic; on
// an unsharded topic of the same driver it runs, its settlement arming the
// next tick, while the sharded topic's claims and settlements (which pass
// the claim's extra arguments and a Next that a plain timer ignores) work.
func TestShardedRecurring(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	d := newDriverOn(t, ontimeredis.Options{Prefix: prefix, Logger: quiet, Shards: map[string]int{"hot": 3}})
	plain := newDriverOn(t, ontimeredis.Options{Prefix: prefix, Logger: quiet})
	past := time.Now().Add(-time.Second)
	rec := ontimedriver.NewRecurring{ID: "every", Spec: "every 1h", At: past, Tick: 1, Payload: []byte("r")}

	// a plain timer on the sharded topic records its shard count
	if _, err := d.Schedule(ctx, "hot", []ontimedriver.NewTimer{{ID: "one", At: past, Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ScheduleRecurring(ctx, "hot", rec, ontimedriver.Upsert); !errors.Is(err, ontimedriver.ErrUnsupported) || !strings.Contains(err.Error(), "sharded (3 shards") {
		t.Errorf("ScheduleRecurring on a sharded topic: %v, want ErrUnsupported", err)
	}
	if err := d.PauseRecurring(ctx, "hot", "every"); !errors.Is(err, ontimedriver.ErrUnsupported) {
		t.Errorf("PauseRecurring on a sharded topic: %v, want ErrUnsupported", err)
	}
	if err := d.ResumeRecurring(ctx, "hot", "every", ontimedriver.Tick{Due: past, N: 2}); !errors.Is(err, ontimedriver.ErrUnsupported) {
		t.Errorf("ResumeRecurring on a sharded topic: %v, want ErrUnsupported", err)
	}
	if _, err := plain.ScheduleRecurring(ctx, "hot", rec, ontimedriver.Upsert); !errors.Is(err, ontimedriver.ErrInvalid) || !strings.Contains(err.Error(), "is sharded (3 shards)") {
		t.Errorf("unsharded ScheduleRecurring on a sharded topic's keys: %v, want ErrInvalid", err)
	}

	// the sharded topic's timer: claimed across the shards, settled with a
	// Next that a plain timer ignores (an ack)
	r, err := d.Claim(ctx, "hot", 10, time.Minute)
	if err != nil || len(r.Timers) != 1 || r.Timers[0].ID != "one" || r.Timers[0].Schedule != "" {
		t.Fatalf("Claim(hot) = %+v, %v, want the plain timer one", r, err)
	}
	c := r.Timers[0]
	next := &ontimedriver.Tick{Due: time.Now().Add(time.Hour).Truncate(time.Millisecond), N: 2}
	res, err := d.Settle(ctx, "hot", []ontimedriver.Settlement{{Lease: ontimedriver.Lease{ID: c.ID, Token: c.Token}, Kind: ontimedriver.Ack, Next: next}})
	if err != nil || len(res) != 1 || res[0] != nil {
		t.Fatalf("Settle(hot) = %v, %v", res, err)
	}
	if n, err := d.Count(ctx, "hot"); err != nil || n != (ontimedriver.Counts{}) {
		t.Errorf("Count(hot) after the ack = %+v, %v, want all zero", n, err)
	}

	// a recurring timer on an unsharded topic of the same driver
	if _, err := d.ScheduleRecurring(ctx, "cold", rec, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	r, err = d.Claim(ctx, "cold", 10, time.Minute)
	if err != nil || len(r.Timers) != 1 || r.Timers[0].Schedule != "every 1h" || r.Timers[0].Tick != 1 {
		t.Fatalf("Claim(cold) = %+v, %v, want tick 1 of every", r, err)
	}
	c = r.Timers[0]
	res, err = d.Settle(ctx, "cold", []ontimedriver.Settlement{{Lease: ontimedriver.Lease{ID: c.ID, Token: c.Token}, Kind: ontimedriver.Ack, Next: next}})
	if err != nil || len(res) != 1 || res[0] != nil {
		t.Fatalf("Settle(cold) = %v, %v", res, err)
	}
	info, err := d.Get(ctx, "cold", "every")
	if err != nil || info.Recurring == nil || info.Recurring.Tick != 2 || info.Recurring.LastTick != 1 || info.Recurring.LastOutcome != "ack" || !info.Due.Equal(next.Due) {
		t.Errorf("Get(cold, every) after tick 1 = %+v (recurring %+v), %v, want tick 2 due %v", info, info.Recurring, err, next.Due)
	}
	if err := d.PauseRecurring(ctx, "cold", "every"); err != nil {
		t.Errorf("PauseRecurring(cold): %v", err)
	}
}
