package ontimebolt_test

import (
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// The claim index's near and far buckets: a timer due within the horizon
// is written to the near one, a later one to the far one, and the
// promoter moves it to the near one once it comes within the horizon;
// claims find timers in either.
func TestPromoter(t *testing.T) {
	t.Parallel()
	// The soon timer is promoted horizon before it is due, and the claim
	// that must see only "now" runs in that window: a wide horizon keeps the
	// window wider than a busy machine's pauses (200 ms was not).
	const horizon = 2 * time.Second
	o := &ontimebolt.Options{}
	ontimebolt.SetNearHorizon(o, horizon)
	d, path := open(t, o)
	schedule(t, d, "p",
		ontimedriver.NewTimer{ID: "now"},
		ontimedriver.NewTimer{ID: "soon", Delay: 3 * horizon},
		ontimedriver.NewTimer{ID: "later", Delay: time.Hour})
	if near, far := ontimebolt.ClaimIndexSplit(t, d, "p"); near != 1 || far != 2 {
		t.Fatalf("after Schedule: %d near, %d far; want now near, soon and later far", near, far)
	}
	wait.For(t, 10*time.Second, func() bool {
		near, far := ontimebolt.ClaimIndexSplit(t, d, "p")
		return near == 2 && far == 1
	}, "the soon timer promoted to the near half")
	if r := claim(t, d, "p", 10, time.Minute); len(r.Timers) != 1 || r.Timers[0].ID != "now" {
		t.Fatalf("claim = %v, want now", ids(r.Timers))
	}
	var got []string
	wait.For(t, 10*time.Second, func() bool {
		got = append(got, ids(claim(t, d, "p", 10, time.Minute).Timers)...)
		return len(got) > 0
	}, "the soon timer claimable")
	if len(got) != 1 || got[0] != "soon" {
		t.Fatalf("claimed %v, want soon", got)
	}
	_ = d.Close()
	reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
}

// TestPromoterIdleWritesNothing: with no timer due within the horizon the
// promoter looks and writes nothing.
func TestPromoterIdleWritesNothing(t *testing.T) {
	t.Parallel()
	o := &ontimebolt.Options{}
	ontimebolt.SetNearHorizon(o, 40*time.Millisecond)
	d, _ := open(t, o)
	for i := range 50 {
		schedule(t, d, "far-"+string(rune('a'+i%26))+string(rune('a'+i/26)), ontimedriver.NewTimer{ID: "x", Delay: time.Hour})
	}
	commits, runs := ontimebolt.Commits(d), ontimebolt.Promotions(d)
	wait.For(t, 10*time.Second, func() bool { return ontimebolt.Promotions(d) >= runs+5 }, "5 more promoter passes")
	if c := ontimebolt.Commits(d); c != commits {
		t.Errorf("the promoter committed %d transactions with nothing to move", c-commits)
	}
}
