package kafkadelay_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// countReleases counts acknowledged releases.
type countReleases struct {
	kafkadelay.BaseObserver
	n     atomic.Int64
	ready chan struct{}
	once  sync.Once
}

func (c *countReleases) Released(kafkadelay.Release) { c.n.Add(1) }
func (c *countReleases) Rebalanced(ev kafkadelay.Rebalance) {
	if ev.Kind == "assigned" && len(ev.Partitions) > 0 {
		c.once.Do(func() { close(c.ready) })
	}
}

// preloadDue produces n records already due into the smallest bucket.
func preloadDue(b *testing.B, c *cluster, n int) {
	cl := c.client(b)
	due := strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)
	body := make([]byte, 100)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: "delay-200ms", Value: body, Headers: []kgo.RecordHeader{
			{Key: kafkadelay.HeaderDue, Value: []byte(due)},
			{Key: kafkadelay.HeaderDestination, Value: []byte("orders")},
			{Key: kafkadelay.HeaderID, Value: []byte(uuid.NewString())},
		}}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
}

// BenchmarkRepublisherDue: records/s the republisher moves from a bucket
// to their destination when they are all due (b.N records); compare with
// BenchmarkForwarder on the same records.
func BenchmarkRepublisherDue(b *testing.B) {
	c := newCluster(b)
	preloadDue(b, c, b.N)
	obs := &countReleases{ready: make(chan struct{})}
	r := c.republisher(b, func(cfg *kafkadelay.Config) { cfg.Observer = obs; cfg.Logger = slog.New(slog.DiscardHandler) })
	<-obs.ready
	b.ResetTimer()
	cpu := processCPU()
	for obs.n.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/record")
	r.stop(b)
}

// BenchmarkForwarder: a plain consumer-group forwarder of the same records
// (poll, produce each with the same producer settings, wait for the acks,
// commit). Its CPU is counted from the group assignment, as the
// republisher's is (its first fetches included); its wall-clock time from
// its first poll.
func BenchmarkForwarder(b *testing.B) {
	c := newCluster(b)
	preloadDue(b, c, b.N)
	ready := make(chan struct{})
	var once sync.Once
	var cpu time.Duration // set before ready is closed
	cl := c.client(b, kgo.ConsumerGroup("fwd"), kgo.ConsumeTopics(c.ladder.Topics()...), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ProducerLinger(0),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			once.Do(func() { cpu = processCPU(); close(ready) })
		}))
	ctx := context.Background()
	moved := 0
	started := false
	for moved < b.N {
		recs := cl.PollRecords(ctx, 10000).Records()
		if !started {
			<-ready
			b.ResetTimer()
			started = true
		}
		var wg sync.WaitGroup
		for _, r := range recs {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: "invoices", Key: r.Key, Value: r.Value, Headers: r.Headers}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
		if err := cl.CommitRecords(ctx, recs...); err != nil {
			b.Fatal(err)
		}
		moved += len(recs)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/record")
}

// processCPU is the CPU time (user and system) the process has used: on
// a machine whose cores other processes keep busy, CPU per record
// compares two runs better than their rates do. It includes the in-process
// kfake cluster's share.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
