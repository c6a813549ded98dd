package ontimebolt_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// Space comes back online: after half of a store's timers are cancelled,
// publishing writes as much per commit as on a store that holds the same
// timers and was never larger, not the list of every free page besides.
// Measured in bytes of pages the commits allocate (bbolt's
// TxStats.PageAlloc, which counts the free list's pages with the others),
// over rounds of 8 publish calls held into one commit each. The free list
// is written after an idle second and at Close, never by these commits;
// the test turns the idle write off so that it cannot land in a round.
func TestPublishAfterMassCancel(t *testing.T) {
	t.Parallel()
	newStore := func() *ontimebolt.Driver {
		o := &ontimebolt.Options{}
		ontimebolt.SetFreelistIdle(o, -1)
		d, _ := open(t, o)
		return d
	}
	same, cancelled := newStore(), newStore()
	// 5,000 timers of 4 KiB (two pages each), every other one cancelled:
	// about 5,000 free pages, a 40 KB free list. The other store holds
	// the 2,500 that are left, written alone.
	big := bytes.Repeat([]byte("b"), 4096)
	var ids []string
	for lo := 0; lo < 5000; lo += 500 {
		var ts, kept []ontimedriver.NewTimer
		for i := lo; i < lo+500; i++ {
			ids = append(ids, fmt.Sprintf("big-%05d", i))
			ts = append(ts, ontimedriver.NewTimer{ID: ids[i], Delay: time.Hour, Payload: big})
			if i%2 == 1 {
				kept = append(kept, ts[len(ts)-1])
			}
		}
		schedule(t, cancelled, "big", ts...)
		schedule(t, same, "big", kept...)
	}
	var half []string
	for i := 0; i < len(ids); i += 2 {
		half = append(half, ids[i])
	}
	res, err := cancelled.CancelBatch(ctx, "big", half)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range res {
		if err != nil {
			t.Fatalf("cancel %s: %v", half[i], err)
		}
	}
	sp, err := cancelled.Space()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the cancels: file %d KB, %d KB free", sp.File>>10, sp.Free>>10)

	payload := bytes.Repeat([]byte("p"), 174)
	alloc := func(d *ontimebolt.Driver) int64 {
		st := ontimebolt.TxStats(d)
		before := st.GetPageAlloc()
		for r := range 6 {
			release := ontimebolt.HoldWriter(t, d)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					schedule(t, d, "small", ontimedriver.NewTimer{ID: fmt.Sprintf("s-%d-%d", r, i), Delay: time.Hour, Payload: payload})
				})
			}
			wait.For(t, 10*time.Second, func() bool { return ontimebolt.Waiting(d) == 8 }, "8 waiting claimers")
			release()
			wg.Wait()
		}
		st = ontimebolt.TxStats(d)
		return st.GetPageAlloc() - before
	}
	f, c := alloc(same), alloc(cancelled)
	t.Logf("bytes of pages 12 commits allocated: the same timers written alone %d, after the cancels %d (%.2f×)", f, c, float64(c)/float64(f))
	if float64(c) > 1.3*float64(f) {
		t.Errorf("after mass cancels the commits allocated %d bytes of pages, with the same timers written alone %d: want at most 1.3×", c, f)
	}
	if sp.Free < sp.File/3 {
		t.Errorf("the test meant to free a third of the file or more: %d of %d bytes free", sp.Free, sp.File)
	}
}
