package ontimebolt_test

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// TestTopicsOpenCold counts the pages of the file a cold Open reads (see
// coldcache_linux_test.go) with 2,000 one-timer topics, next to a store
// with the same 2,000 timers in one topic (as big a file, the same
// readahead), before and after every timer is cancelled: at most one page
// per 10 topics more with timers, at most 4 pages more once they are
// cancelled.
func TestTopicsOpenCold(t *testing.T) {
	t.Parallel()
	coldOpen := func(path string) int {
		dropCache(t, path)
		d := reopen(t, path, nil)
		n := residentPages(t, path)
		st := ontimebolt.DBStats(d)
		info, _ := os.Stat(path)
		t.Logf("%s: %d bytes, %d free pages, freelist %d B", path, info.Size(), st.FreePageN, st.FreelistInuse)
		_ = d.Close()
		return n
	}
	many, manyPath := open(t, nil)
	topics := oneTimerTopics(t, many, costTopics)
	one, onePath := open(t, nil)
	payload := bytes.Repeat([]byte("p"), 174)
	var timers []ontimedriver.NewTimer
	for i := range costTopics {
		timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprintf("timer-%06d", i), Delay: time.Hour, Payload: payload})
	}
	schedule(t, one, "tenant", timers...)
	for _, d := range []interface{ Close() error }{many, one} {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	manyFull, oneFull := coldOpen(manyPath), coldOpen(onePath)

	many, one = reopen(t, manyPath, nil), reopen(t, onePath, nil)
	cancelAll(t, many, topics)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < len(timers); i += 16 {
				if err := one.Cancel(ctx, "tenant", timers[i].ID); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, d := range []interface{ Close() error }{many, one} {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	manyEmptied, oneEmptied := coldOpen(manyPath), coldOpen(onePath)
	t.Logf("pages a cold Open read: %d one-timer topics %d, one topic of %d timers %d; after cancelling every timer %d and %d",
		costTopics, manyFull, costTopics, oneFull, manyEmptied, oneEmptied)
	if manyFull > oneFull+costTopics/10 {
		t.Errorf("a cold Open of %d one-timer topics read %d pages, of one topic %d: want at most %d more",
			costTopics, manyFull, oneFull, costTopics/10)
	}
	if manyEmptied > oneEmptied+4 {
		t.Errorf("after every timer was cancelled a cold Open read %d pages (%d topics), %d (one topic): want at most 4 more",
			manyEmptied, costTopics, oneEmptied)
	}
}
