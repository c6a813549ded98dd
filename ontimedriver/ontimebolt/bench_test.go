package ontimebolt_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
)

// Every benchmark writes to a fresh file with fsync on (the store has no
// switch to turn it off) and reports timers/s: timers written (or claimed
// and acked) per second of wall time.

var benchPayload = make([]byte, 100)

func reportRate(b *testing.B, timers int) {
	b.ReportMetric(float64(timers)/b.Elapsed().Seconds(), "timers/s")
}

// BenchmarkScheduleSingle: one caller, one timer per call, so one commit
// and fsync per timer. The floor.
func BenchmarkScheduleSingle(b *testing.B) {
	d, _ := open(b, nil)
	i := 0
	for b.Loop() {
		schedule(b, d, "bench", ontimedriver.NewTimer{ID: fmt.Sprint(i), Delay: time.Hour, Payload: benchPayload})
		i++
	}
	reportRate(b, i)
}

// BenchmarkScheduleBatch100: one caller, 100 timers per call.
func BenchmarkScheduleBatch100(b *testing.B) {
	d, _ := open(b, nil)
	n := 0
	timers := make([]ontimedriver.NewTimer, 100)
	for b.Loop() {
		for j := range timers {
			timers[j] = ontimedriver.NewTimer{ID: fmt.Sprint(n), Delay: time.Hour, Payload: benchPayload}
			n++
		}
		schedule(b, d, "bench", timers...)
	}
	reportRate(b, n)
}

// BenchmarkScheduleParallel: many callers, one timer per call. Group commit
// lets calls that arrive during a commit share the next one, so the rate
// grows with the callers instead of staying at one fsync per timer.
func BenchmarkScheduleParallel(b *testing.B) {
	for _, callers := range []int{8, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			d, _ := open(b, nil)
			var next atomic.Int64
			// RunParallel starts parallelism × GOMAXPROCS goroutines.
			b.SetParallelism(max(1, callers/maxProcs()))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprint(next.Add(1))
					_, err := d.Schedule(ctx, "bench", []ontimedriver.NewTimer{{ID: id, Delay: time.Hour, Payload: benchPayload}}, ontimedriver.Upsert)
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportRate(b, int(next.Load()))
		})
	}
}

// BenchmarkClaimAck: claim 100 due timers and ack them in one Settle, with
// the topic preloaded with b.N timers (the preload is not timed).
func BenchmarkClaimAck(b *testing.B) {
	d, _ := open(b, nil)
	const batch = 100
	n := 0
	timers := make([]ontimedriver.NewTimer, 0, 1000)
	preload := func(count int) {
		for n < count {
			timers = timers[:0]
			for range min(1000, count-n) {
				timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprint(n), Payload: benchPayload})
				n++
			}
			schedule(b, d, "bench", timers...)
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
		r := claim(b, d, "bench", batch, time.Minute)
		ops = ops[:0]
		for _, ct := range r.Timers {
			ops = append(ops, ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: ct.ID, Token: ct.Token}, Kind: ontimedriver.Ack})
		}
		for i, err := range settle(b, d, "bench", ops...) {
			if err != nil {
				b.Fatalf("ack %s: %v", ops[i].ID, err)
			}
		}
		done += len(r.Timers)
	}
	reportRate(b, done)
}
