package ontimeredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestCountTopicsPaths: CountTopics as one Redis runs it (count_topics.lua)
// and as a Cluster runs it (plain commands, then count.lua for the topics
// with a lease or a dead letter: the driver made to keep the index by
// hints), after SCRIPT FLUSH (NOSCRIPT inside the pipeline):
// a live lease, a dead letter, a topic with neither, one that never held
// anything, and an expired lease not yet reclaimed (scheduled, not
// leased), each as Count has it. Every CountTopics follows a SCRIPT FLUSH.
func TestCountTopicsPaths(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rdb := srv.NewClient(t)
	for _, hints := range []bool{false, true} {
		ctx := context.Background()
		prefix := redistest.Prefix(t) + "script:"
		if hints {
			prefix = redistest.Prefix(t) + "hints:"
		}
		d, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: prefix, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		if hints {
			ontimeredis.UseIndexHints(d)
		}
		schedule := func(topic string, ts ...ontimedriver.NewTimer) {
			t.Helper()
			if _, err := d.Schedule(ctx, topic, ts, ontimedriver.Upsert); err != nil {
				t.Fatal(err)
			}
		}
		claim := func(topic string, lease time.Duration) ontimedriver.ClaimedTimer {
			t.Helper()
			var got []ontimedriver.ClaimedTimer
			wait.For(t, 10*time.Second, func() bool {
				res, err := d.Claim(ctx, topic, 1, lease)
				if err != nil {
					t.Fatal(err)
				}
				got = res.Timers
				return len(got) == 1
			}, "a timer of %s claimed", topic)
			return got[0]
		}
		schedule("leased", ontimedriver.NewTimer{ID: "a"}, ontimedriver.NewTimer{ID: "b", Delay: time.Hour})
		claim("leased", time.Hour)
		schedule("dead", ontimedriver.NewTimer{ID: "a"}, ontimedriver.NewTimer{ID: "b", Delay: time.Hour})
		c := claim("dead", time.Hour)
		if _, err := d.Settle(ctx, "dead", []ontimedriver.Settlement{{Lease: ontimedriver.Lease{ID: c.ID, Token: c.Token}, Kind: ontimedriver.Dead, Reason: "r"}}); err != nil {
			t.Fatal(err)
		}
		schedule("plain", ontimedriver.NewTimer{ID: "a", Delay: time.Hour}, ontimedriver.NewTimer{ID: "b", Delay: time.Hour})
		schedule("expired", ontimedriver.NewTimer{ID: "a"})
		claim("expired", 50*time.Millisecond)
		topics := []string{"leased", "dead", "plain", "never", "expired", "plain"}
		want := []ontimedriver.Counts{{Scheduled: 1, Leased: 1}, {Scheduled: 1, Dead: 1}, {Scheduled: 2}, {}, {Scheduled: 1}, {Scheduled: 2}}
		var got []ontimedriver.Counts
		wait.For(t, 10*time.Second, func() bool {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if got, err = d.CountTopics(ctx, topics); err != nil {
				t.Fatalf("hints %v: %v", hints, err)
			}
			return got[4] == want[4] // the short lease expired
		}, "the lease of expired to expire")
		for i, topic := range topics {
			c, err := d.Count(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if got[i] != want[i] || c != want[i] {
				t.Errorf("hints %v: %s: CountTopics %+v, Count %+v, want %+v", hints, topic, got[i], c, want[i])
			}
		}
	}
}
