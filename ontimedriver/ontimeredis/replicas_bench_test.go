package ontimeredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// BenchmarkWaitReplicas measures what waiting for a replica costs a
// publish: one primary with one replica (both on this host), Publish of
// one timer from one goroutine and from 16, and PublishBatch of 500, each
// without and with WaitReplicas(1) in the same run. The wait is bounded
// at 10 s: on a loaded 2-core machine 1 s was seen to pass (the replica
// not scheduled in time), which fails a publish with ErrNotReplicated.
//
//	go test -run '^$' -bench WaitReplicas -benchtime 3s ./ontimedriver/ontimeredis/
func BenchmarkWaitReplicas(b *testing.B) {
	primary := redistest.StartServer(b)
	redistest.StartReplica(b, primary)
	d, err := ontimeredis.New(primary.NewClient(b), &ontimeredis.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	body := make([]byte, 100)
	for _, wait := range []int{0, 1} {
		var popts []ontime.PublishOption
		var bopts []ontime.BatchOption
		name := "primary"
		if wait > 0 {
			name = "wait1"
			popts = append(popts, ontime.WaitReplicas(wait, 10*time.Second))
			bopts = append(bopts, ontime.BatchWaitReplicas(wait, 10*time.Second))
		}
		popts = append(popts, ontime.In(time.Hour))
		b.Run("publish1/"+name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.Publish(ctx, "w1", body, popts...); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("publish16/"+name, func(b *testing.B) {
			b.SetParallelism(8) // 16 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Publish(ctx, "w16", body, popts...); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		b.Run("batch500/"+name, func(b *testing.B) {
			batch := make([]ontime.Timer, 500)
			for i := range batch {
				batch[i] = ontime.Timer{Body: body, Delay: time.Hour}
			}
			for b.Loop() {
				for i := range batch {
					batch[i].ID = ""
				}
				if _, err := c.PublishBatch(ctx, "w500", batch, bopts...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*500)/b.Elapsed().Seconds(), "timers/s")
		})
	}
}
