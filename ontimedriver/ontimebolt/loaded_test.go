package ontimebolt_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// A loaded store keeps its speed: the commits that publish, claim and ack
// timers due now in 8 of 100 topics write at most 1.3 times the pages (and
// 2 more) with 30,000 timers due in a year pending in those topics as on
// an empty store. Writes per commit are what makes a commit slower (each
// page is a pwrite, and the fdatasync waits for them); BenchmarkLoaded
// measures the time, with a million timers pending. Every round holds the
// writer while its 8 calls queue, so that each round is one commit on
// both stores and the counts do not depend on timing.
func TestLoadedStoreCommitPages(t *testing.T) {
	t.Parallel()
	const topics, pending = 100, 30_000
	topic := func(i int) string { return fmt.Sprintf("tenant-%03d", i%topics) }
	payload := bytes.Repeat([]byte("p"), 174)
	newID := func() string { return uuid.Must(uuid.NewV7()).String() }

	empty, _ := open(t, nil)
	loaded, _ := open(t, nil)
	for lo := 0; lo < pending; lo += 1000 {
		var ts []ontimedriver.NewTimer
		for range 1000 {
			ts = append(ts, ontimedriver.NewTimer{ID: newID(), Delay: 365 * 24 * time.Hour, Payload: payload})
		}
		schedule(t, loaded, topic(lo/1000), ts...)
	}

	// round runs op for 8 topics in one commit and returns the pages
	// written.
	round := func(d *ontimebolt.Driver, r int, op func(topic string)) int64 {
		st := ontimebolt.TxStats(d)
		before := st.GetWrite()
		release := ontimebolt.HoldWriter(t, d)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() { op(topic(r*8 + i)) })
		}
		wait.For(t, 10*time.Second, func() bool { return ontimebolt.Waiting(d) == 8 }, "8 waiting claimers")
		release()
		wg.Wait()
		st = ontimebolt.TxStats(d)
		return st.GetWrite() - before
	}
	pages := map[string]map[string]int64{}
	for name, d := range map[string]*ontimebolt.Driver{"empty": empty, "loaded": loaded} {
		pages[name] = map[string]int64{}
		var mu sync.Mutex
		claimed := map[string][]ontimedriver.ClaimedTimer{}
		for r := range 6 {
			pages[name]["publish"] += round(d, r, func(tp string) {
				schedule(t, d, tp, ontimedriver.NewTimer{ID: newID(), Payload: payload})
			})
			pages[name]["claim"] += round(d, r, func(tp string) {
				c := claim(t, d, tp, 10, time.Minute)
				mu.Lock()
				claimed[tp] = c.Timers
				mu.Unlock()
			})
			pages[name]["ack"] += round(d, r, func(tp string) {
				mu.Lock()
				cs := claimed[tp]
				mu.Unlock()
				var ops []ontimedriver.Settlement
				for _, c := range cs {
					ops = append(ops, ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: c.ID, Token: c.Token}, Kind: ontimedriver.Ack})
				}
				for i, err := range settle(t, d, tp, ops...) {
					if err != nil {
						t.Errorf("ack %s: %v", ops[i].ID, err)
					}
				}
			})
		}
	}
	for _, op := range []string{"publish", "claim", "ack"} {
		e, l := pages["empty"][op], pages["loaded"][op]
		t.Logf("%-7s pages written in 6 commits: empty %d, %d pending %d (%.2f×)", op, e, pending, l, float64(l)/float64(e))
		if float64(l) > 1.3*float64(e)+2*6 {
			t.Errorf("%s: a loaded store wrote %d pages in 6 commits, an empty one %d: want at most 1.3× and 2 more per commit", op, l, e)
		}
	}
}
