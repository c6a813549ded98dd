package ontimebolt_test

import (
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// BenchmarkDriver runs the shared driver benchmarks (package drivertest)
// on a fresh file per benchmark, fsync on (the store has no switch to turn
// it off). The Redis driver runs the same ones; compare with
//
//	go test -run '^$' -bench Driver ./ontimedriver/ontimebolt/ ./ontimedriver/ontimeredis/
func BenchmarkDriver(b *testing.B) {
	drivertest.Bench(b, drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			d, _ := open(t, nil)
			return d
		},
	})
}

// BenchmarkDueTopics asks for due topics among 100,000 topics, none due
// (idle), or three due; and with a pattern that matches none of them
// (DueTopics passes over 1000 entries, then gives up on Next).
func BenchmarkDueTopics(b *testing.B) {
	const n = 100_000
	d, _ := open(b, &ontimebolt.Options{MaxBatch: 256})
	manyTopics(b, d, "tenant-", n, time.Hour)
	run := func(name, pattern string, wantDue int) {
		b.Run(name, func(b *testing.B) {
			v0 := ontimebolt.IndexVisited(d)
			for b.Loop() {
				r, err := d.DueTopics(ctx, pattern, 0, 100)
				if err != nil || len(r.Topics) != wantDue {
					b.Fatalf("DueTopics = %v, %v", r, err)
				}
			}
			b.ReportMetric(float64(ontimebolt.IndexVisited(d)-v0)/float64(b.N), "entries/op")
		})
	}
	run("idle/*", "*", 0)
	run("idle/pattern", "nomatch-*", 0)
	for _, topic := range []string{"tenant-17", "tenant-4242", "tenant-9"} {
		if _, err := d.FireNow(ctx, topic, "x"); err != nil {
			b.Fatal(err)
		}
	}
	run("3due/*", "*", 3)
}
