package ontimebolt_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// BenchmarkEndToEnd is the library on the embedded store, fsync on: a
// Worker (MaxConcurrency 64) runs while 16 goroutines publish b.N timers
// due now in batches of 100, until every one was handled and acked (the
// store's count back to 0). Besides timers/s it reports commits (write
// transactions, one group commit each) per timer and bbolt's page writes
// and write time per commit.
//
//	go test -run '^$' -bench EndToEnd -benchtime 100000x ./ontimedriver/ontimebolt/
func BenchmarkEndToEnd(b *testing.B) {
	d, _ := open(b, nil)
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var handled atomic.Int64
	w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, "e2e", func(context.Context, *ontime.Message[[]byte]) error {
		handled.Add(1)
		return nil
	}, &ontime.TopicOptions{MaxConcurrency: 64}); err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = w.Run(rctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	time.Sleep(50 * time.Millisecond)

	body := make([]byte, 100)
	n := b.N
	commits0, st0 := ontimebolt.Commits(d), ontimebolt.TxStats(d)
	b.ResetTimer()
	var wg sync.WaitGroup
	const publishers, batch = 16, 100
	per := (n + publishers - 1) / publishers
	for p := range publishers {
		lo, hi := p*per, min((p+1)*per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]ontime.Timer, 0, batch)
			for i := lo; i < hi; i += batch {
				buf = buf[:0]
				for range min(batch, hi-i) {
					buf = append(buf, ontime.Timer{Body: body})
				}
				if _, err := c.PublishBatch(ctx, "e2e", buf); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		cnt, err := d.Count(ctx, "e2e")
		if err != nil {
			b.Fatal(err)
		}
		if handled.Load() >= int64(n) && cnt.Scheduled+cnt.Leased == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("handled %d of %d, %d pending", handled.Load(), n, cnt.Scheduled+cnt.Leased)
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "timers/s")
	commits := float64(ontimebolt.Commits(d) - commits0)
	st := ontimebolt.TxStats(d)
	b.ReportMetric(commits/float64(n), "commits/timer")
	b.ReportMetric(float64(st.GetWrite()-st0.GetWrite())/commits, "pagewrites/commit")
	b.ReportMetric(float64((st.GetWriteTime()-st0.GetWriteTime()).Microseconds())/commits, "writeµs/commit")
}
