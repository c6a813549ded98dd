package ontime

import (
	"errors"
	"testing"
	"time"

	"github.com/ontime-go/ontime/schedule"
)

// TestNextTickPolicies: the tick armed after a tick settles, on time, after
// missed ticks with FireOnce and FireEach, and at a schedule's end.
func TestNextTickPolicies(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	every := schedule.EveryFrom(time.Second, t0)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	cases := []struct {
		name   string
		missed MissedPolicy
		cur    time.Time
		now    time.Time
		want   time.Time
	}{
		{"on time", FireOnce(), sec(0), sec(0).Add(300 * time.Millisecond), sec(1)},
		{"settled exactly at the next instant", FireOnce(), sec(0), sec(1), sec(2)},
		{"once after an outage: skip to the first tick after now", FireOnce(), sec(0), sec(10).Add(500 * time.Millisecond), sec(11)},
		{"each(1) is once", FireEach(1), sec(0), sec(10).Add(500 * time.Millisecond), sec(11)},
		{"each(3): the oldest of the last 2 missed", FireEach(3), sec(0), sec(10).Add(500 * time.Millisecond), sec(9)},
		{"each(3) with fewer missed: the first missed", FireEach(3), sec(0), sec(1).Add(500 * time.Millisecond), sec(1)},
		{"each(5) far behind (past the walk bound)", FireEach(5), sec(0), sec(200_000), sec(199_997)},
		{"once far behind", FireOnce(), sec(0), sec(200_000).Add(time.Millisecond), sec(200_001)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := parseSpec(encodeSpec(every, c.missed, 0))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := rs.nextTick("id", c.cur, 7, c.now)
			if !ok || !got.Due.Equal(c.want) || got.N != 8 {
				t.Errorf("nextTick(%s, now %s) = %v %d %v, want %s 8", c.cur, c.now, got.Due, got.N, ok, c.want)
			}
			if !got.Due.After(c.cur) {
				t.Errorf("next tick %s not after the current %s", got.Due, c.cur)
			}
		})
	}
}

// TestSpecRoundTrip: the stored spec carries the schedule and the policy;
// bad policies are refused.
func TestSpecRoundTrip(t *testing.T) {
	s := schedule.Every(5 * time.Minute)
	for _, p := range []MissedPolicy{FireOnce(), FireEach(4)} {
		rs, err := parseSpec(encodeSpec(s, p, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if rs.canon != s.String() || rs.missed != p || rs.jitter != time.Minute {
			t.Errorf("round trip of %v: %q %v %v", p, rs.canon, rs.missed, rs.jitter)
		}
	}
	if got := encodeSpec(s, FireOnce(), 0); got != "every 5m" {
		t.Errorf("default policy spec %q, want the schedule alone", got)
	}
	for _, bad := range []string{"every 5m;missed=each:0", "every 5m;missed=some", "every 5m;missed=each:x", "nonsense", "every 5m;jitter=-1s", "every 5m;jitter=x", "every 5m;other=1"} {
		if _, err := parseSpec(bad); err == nil {
			t.Errorf("parseSpec(%q) accepted", bad)
		}
	}
	if _, err := parseSpec("every 5m;missed=each:0"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad policy: %v, want ErrInvalid", err)
	}
}

// TestJitterTicks: with a jitter window a tick is due at its instant plus
// JitterFor (never before the instant, within the window), and the
// instant is kept apart.
func TestJitterTicks(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rs, err := parseSpec(encodeSpec(schedule.EveryFrom(time.Minute, t0), FireOnce(), 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	spread := map[time.Duration]bool{}
	for i := range 20 {
		at := t0.Add(time.Duration(i) * time.Minute)
		tk, ok := rs.nextTick("tenant-7", at, int64(i+1), at.Add(time.Second))
		want := at.Add(time.Minute)
		if !ok || !tk.At.Equal(want) || tk.Due.Before(want) || !tk.Due.Before(want.Add(10*time.Second)) {
			t.Fatalf("tick after %s: %+v, want instant %s, due within 10 s after it", at, tk, want)
		}
		if j := schedule.JitterFor("tenant-7", want, 10*time.Second); !tk.Due.Equal(want.Add(j)) {
			t.Errorf("due %s, want instant + JitterFor = %s", tk.Due, want.Add(j))
		}
		spread[tk.Due.Sub(want)] = true
	}
	if len(spread) < 5 {
		t.Errorf("20 ticks took %d distinct jitters; want them spread", len(spread))
	}
}

// FuzzParseSpec: a stored recurring spec parses or is refused with
// ErrInvalid, never a panic; what parses encodes back to a spec that
// parses to the same.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"every 5m", "every 5m;missed=each:3", "cron 0 9 * * MON-FRI Europe/Berlin;jitter=30s", "every 1h;missed=each:2;jitter=1m", "every 5m;", ";;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		rs, err := parseSpec(spec)
		if err != nil {
			return
		}
		again, err := parseSpec(encodeSpec(rs.sched, rs.missed, rs.jitter))
		if err != nil || again.canon != rs.sched.String() || again.missed != rs.missed || again.jitter != rs.jitter {
			t.Fatalf("%q: re-encoded spec %+v, %v", spec, again, err)
		}
	})
}

// TestCountTicks: the instants in [first, to], walked up to the bound and
// extrapolated past it.
func TestCountTicks(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rs, err := parseSpec(schedule.EveryFrom(time.Second, t0).String())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		to   time.Duration
		want int64
	}{
		{0, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 2},
		{10*time.Second + 1, 11},
		{maxCatchUpWalk * time.Second, maxCatchUpWalk + 1},
		{1_000_000 * time.Second, 1_000_001},
	} {
		n, last := rs.countTicks(t0, t0.Add(c.to))
		if n != c.want {
			t.Errorf("[t0, t0+%v]: %d instants, want %d", c.to, n, c.want)
		}
		if c.want <= maxCatchUpWalk && !last.Equal(t0.Add(time.Duration(c.want-1)*time.Second)) {
			t.Errorf("[t0, t0+%v]: last %v", c.to, last)
		}
	}
}
