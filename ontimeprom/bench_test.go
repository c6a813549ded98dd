package ontimeprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimeprom"
)

// BenchmarkHooksPerTimer is the metrics' own work for one timer of the
// end-to-end benchmark, on all CPUs at once: its share of a batch of 100
// publishes, a delivery's start and end, and its share of the store calls
// (about 0.1 per timer there; one here, to be safe). Compare it with the
// CPU a timer costs end to end (go_us/timer of BenchmarkE2E with
// ONTIME_BENCH_PROFILE=1).
func BenchmarkHooksPerTimer(b *testing.B) {
	m, err := ontimeprom.New(prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ev := &ontime.PublishEvent{Topic: "bench", Timers: make([]ontime.Timer, 100), Results: make([]ontime.PublishResult, 100)}
	due := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := &ontime.Delivery{Topic: "bench", ID: "x", Attempt: 1, Due: due, FiredAt: due.Add(time.Millisecond)}
		i := 0
		for pb.Next() {
			if i%100 == 0 {
				m.AfterPublish(ctx, ev)
			}
			i++
			dctx := m.DeliveryStart(ctx, d)
			m.DeliveryEnd(dctx, d, ontime.DeliveryResult{Outcome: ontime.OutcomeAcked, Duration: 50 * time.Microsecond})
			m.StoreCall(ctx, ontime.StoreCall{Op: "settle", Topic: "bench", Duration: 200 * time.Microsecond})
		}
	})
}
