package ontime

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ontime-go/ontime/schedule"
)

type unfiredRec []UnfiredTicks

func (r *unfiredRec) UnfiredTicks(_ context.Context, u *UnfiredTicks) { *r = append(*r, *u) }

type panicky struct{}

func (panicky) UnfiredTicks(context.Context, *UnfiredTicks) { panic("boom") }

// TestMissedTicksReported: the ticks a late tick's settlement leaves
// unfired, per policy, as withNextTick reports them: every instant between
// the settled tick and the tick it arms; nothing for a tick on time; a
// panicking hook does not stop the others.
func TestMissedTicksReported(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sec := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Second))) }
	every := schedule.EveryFrom(time.Second, t0)
	for _, c := range []struct {
		name     string
		missed   MissedPolicy
		jitter   time.Duration
		late     float64 // seconds after t0 the tick at t0 settles
		n        int64
		from, to time.Time
	}{
		{"on time", FireOnce(), 0, 0.5, 0, time.Time{}, time.Time{}},
		{"once: all of (cur, now]", FireOnce(), 0, 10.5, 10, sec(1), sec(10)},
		{"each(3): all but the last 2", FireEach(3), 0, 10.5, 8, sec(1), sec(8)},
		{"each(20): none", FireEach(20), 0, 10.5, 0, time.Time{}, time.Time{}},
		{"once, with jitter", FireOnce(), 300 * time.Millisecond, 3.2, 3, sec(1), sec(3)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rec unfiredRec
			e := &executor{topic: "t", hooks: &hookSet{unfired: []UnfiredTicksHook{panicky{}, &rec}}, log: slog.New(slog.DiscardHandler)}
			rs, err := parseSpec(encodeSpec(every, c.missed, c.jitter))
			if err != nil {
				t.Fatal(err)
			}
			next, ok := rs.nextTick("id", t0, 1, sec(c.late))
			if !ok {
				t.Fatal("no next tick")
			}
			e.missedTicks(context.Background(), rs, "id", t0, next.Instant())
			if c.n == 0 {
				if len(rec) != 0 {
					t.Fatalf("reported %+v, want nothing", rec)
				}
				return
			}
			if len(rec) != 1 || rec[0].Count != c.n || !rec[0].From.Equal(c.from) || !rec[0].To.Equal(c.to) || rec[0].Paused || rec[0].Topic != "t" || rec[0].ID != "id" || rec[0].Schedule != every.String() {
				t.Fatalf("reported %+v, want %d from %v to %v", rec, c.n, c.from, c.to)
			}
		})
	}
}
