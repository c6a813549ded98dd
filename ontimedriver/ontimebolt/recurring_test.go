package ontimebolt_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// TestRecurringSurvivesReopenAndCompact: recurring timers, paused and
// running, are on disk: after a reopen with CheckOnOpen (which checks the
// schedule entries) and after Compact they are as they were.
func TestRecurringSurvivesReopenAndCompact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, path := open(t, nil)
	now := time.Now()
	for _, id := range []string{"running", "paused"} {
		res, err := d.ScheduleRecurring(ctx, "rec", ontimedriver.NewRecurring{ID: id, Spec: "every 1h", At: now.Add(time.Hour), TickAt: now.Add(time.Hour), Tick: 4, Payload: []byte(id)}, ontimedriver.Upsert)
		if err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
	}
	if err := d.PauseRecurring(ctx, "rec", "paused"); err != nil {
		t.Fatal(err)
	}
	want := map[string]ontimedriver.RecurringInfo{}
	for _, id := range []string{"running", "paused"} {
		ti, err := d.Get(ctx, "rec", id)
		if err != nil || ti.Recurring == nil {
			t.Fatal(id, ti, err)
		}
		want[id] = *ti.Recurring
	}
	check := func(what string, d *ontimebolt.Driver) {
		t.Helper()
		for id, w := range want {
			ti, err := d.Get(ctx, "rec", id)
			if err != nil || ti.Recurring == nil || *ti.Recurring != w {
				t.Errorf("%s: Get(%q) = %+v, %v; want %+v", what, id, ti, err, w)
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
	check("after reopen", d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ontimebolt.Compact(path, nil); err != nil {
		t.Fatal(err)
	}
	d = reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
	check("after Compact", d)
	if err := d.ResumeRecurring(ctx, "rec", "paused", ontimedriver.Tick{Due: now.Add(-time.Second), N: 5}); err != nil {
		t.Fatal(err)
	}
	r, err := d.Claim(ctx, "rec", 10, time.Minute)
	if err != nil || len(r.Timers) != 1 || r.Timers[0].ID != "paused" || r.Timers[0].Tick != 5 {
		t.Fatalf("claim after resume: %+v, %v; want the resumed tick 5", r, err)
	}
}
