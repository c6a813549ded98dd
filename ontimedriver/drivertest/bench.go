package drivertest

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Bench runs the driver benchmarks with drivers h makes, so that every
// store is measured by the same code and reported side by side:
//
//	func BenchmarkDriver(b *testing.B) { drivertest.Bench(b, harness) }
//
// Each reports timers/s: timers written (or claimed and acked) per second of
// wall time. Payloads are 100 bytes.
func Bench(b *testing.B, h Harness) {
	b.Run("ScheduleSingle", func(b *testing.B) { benchScheduleSingle(b, h) })
	b.Run("ScheduleBatch100", func(b *testing.B) { benchScheduleBatch(b, h, 100) })
	for _, callers := range []int{8, 64} {
		b.Run(fmt.Sprintf("ScheduleParallel/callers=%d", callers), func(b *testing.B) { benchScheduleParallel(b, h, callers) })
	}
	b.Run("ClaimAck100", func(b *testing.B) { benchClaimAck(b, h, 100) })
}

var benchPayload = make([]byte, 100)

func reportRate(b *testing.B, timers int) {
	b.ReportMetric(float64(timers)/b.Elapsed().Seconds(), "timers/s")
}

func benchSchedule(b *testing.B, d ontimedriver.Driver, timers []ontimedriver.NewTimer) {
	if _, err := d.Schedule(context.Background(), "bench", timers, ontimedriver.Upsert); err != nil {
		b.Fatal(err)
	}
}

// benchScheduleSingle: one caller, one timer per call (for a store that
// syncs to disk, one commit per timer: the floor).
func benchScheduleSingle(b *testing.B, h Harness) {
	d := h.New(b)
	i := 0
	for b.Loop() {
		benchSchedule(b, d, []ontimedriver.NewTimer{{ID: fmt.Sprint(i), Delay: time.Hour, Payload: benchPayload}})
		i++
	}
	reportRate(b, i)
}

// benchScheduleBatch: one caller, n timers per call.
func benchScheduleBatch(b *testing.B, h Harness, n int) {
	d := h.New(b)
	total := 0
	timers := make([]ontimedriver.NewTimer, n)
	for b.Loop() {
		for j := range timers {
			timers[j] = ontimedriver.NewTimer{ID: fmt.Sprint(total), Delay: time.Hour, Payload: benchPayload}
			total++
		}
		benchSchedule(b, d, timers)
	}
	reportRate(b, total)
}

// benchScheduleParallel: many callers, one timer per call (group commit,
// pipelining).
func benchScheduleParallel(b *testing.B, h Harness, callers int) {
	d := h.New(b)
	var next atomic.Int64
	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprint(next.Add(1))
			_, err := d.Schedule(context.Background(), "bench", []ontimedriver.NewTimer{{ID: id, Delay: time.Hour, Payload: benchPayload}}, ontimedriver.Upsert)
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, int(next.Load()))
}

// benchClaimAck: claim batch due timers and ack them in one Settle, with
// the topic preloaded (the preload is not timed).
func benchClaimAck(b *testing.B, h Harness, batch int) {
	ctx := context.Background()
	d := h.New(b)
	n := 0
	timers := make([]ontimedriver.NewTimer, 0, 1000)
	preload := func(count int) {
		for n < count {
			timers = timers[:0]
			for range min(1000, count-n) {
				timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprint(n), Payload: benchPayload})
				n++
			}
			benchSchedule(b, d, timers)
		}
	}
	done := 0
	ops := make([]ontimedriver.Settlement, 0, batch)
	for b.Loop() {
		if done+batch > n {
			b.StopTimer()
			preload(n + 100*batch)
			b.StartTimer()
		}
		r, err := d.Claim(ctx, "bench", batch, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
		for _, ct := range r.Timers {
			ops = append(ops, ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: ct.ID, Token: ct.Token}, Kind: ontimedriver.Ack})
		}
		errs, err := d.Settle(ctx, "bench", ops)
		if err != nil {
			b.Fatal(err)
		}
		for i, err := range errs {
			if err != nil {
				b.Fatalf("ack %s: %v", ops[i].ID, err)
			}
		}
		done += len(r.Timers)
	}
	reportRate(b, done)
}
