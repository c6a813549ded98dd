package ontimeredis_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestCompatPythonScoresNeverEarly: timers written as the Python library
// writes them (float-seconds scores, time.time() + delay, with arbitrary
// sub-millisecond and sub-microsecond parts), claimed by ontime in a tight
// loop, are never claimed while the store's clock still reads a microsecond
// entirely before their score: a claim whose TIME, plus one microsecond
// (TIME is rounded down), does not reach the score certainly came early.
// (Before claims compared at the store clock's full resolution, a score
// was due from the start of its millisecond on: up to 1 ms early.)
func TestCompatPythonScoresNeverEarly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newCompat(t, "")
	const topic = "py-early"
	tl, pl := e.timeline+":"+topic, e.payloads+":"+topic
	const n = 200
	now, err := e.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	scores := map[string]float64{}
	if _, err := e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			id := fmt.Sprintf("py-%03d", i)
			// due 20..60 ms ahead, at any fraction of a millisecond
			delay := 0.020 + rand.Float64()*0.040
			s := float64(now.UnixMicro())/1e6 + delay
			scores[id] = s
			p.ZAdd(ctx, tl, redis.Z{Score: s, Member: id})
			p.HSet(ctx, pl, id, unhex(t, vectorA))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	claimed, early, claims := 0, 0, 0
	var worst time.Duration
	deadline := time.Now().Add(10 * time.Second)
	for claimed < n && time.Now().Before(deadline) {
		r, err := e.d.Claim(ctx, topic, n, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		claims++
		nowUs := r.Now.UnixMicro()
		for _, c := range r.Timers {
			claimed++
			s := scores[c.ID]
			sec := math.Floor(s)
			exactUs := sec*1e6 + (s-sec)*1e6 // exact: see score_us in lua/compat_common.lua
			if float64(nowUs+1) <= exactUs {
				early++
				ahead := time.Duration((exactUs - float64(nowUs)) * 1e3)
				worst = max(worst, ahead)
				if early <= 5 {
					t.Errorf("%s (score %.7f) claimed at store time %s, %v before its score", c.ID, s, r.Now.UTC().Format("15:04:05.000000"), ahead)
				}
			}
			if r.Now.Before(c.Due) {
				t.Errorf("%s claimed at store time %s, before its reported Due %s", c.ID, r.Now.UTC().Format("15:04:05.000000"), c.Due.UTC().Format("15:04:05.000000"))
			}
		}
	}
	if claimed != n {
		t.Fatalf("claimed %d of %d timers in 10s", claimed, n)
	}
	if early > 0 {
		t.Errorf("%d of %d Python timers claimed early, up to %v", early, n, worst)
	}
	t.Logf("%d Python timers claimed in %d claims, %d early", n, claims, early)
}
