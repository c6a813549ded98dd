package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// KafkaResult is the Kafka republisher scenario: its throughput against a
// plain consume→produce forwarder on the same kfake cluster, its lateness
// at a steady rate, and the memory it holds per in-flight record.
type KafkaResult struct {
	Brokers    int `json:"brokers"`
	Partitions int `json:"partitions"`
	// N records per throughput run, already due, in the smallest bucket.
	N int `json:"n"`
	// Republisher and Forwarder are records/s of each run; Ratio is the
	// ratio of the medians.
	Republisher []F `json:"republisher_per_s"`
	Forwarder   []F `json:"forwarder_per_s"`
	Ratio       F   `json:"ratio"`
	// Lateness at the destination consumer (receive instant minus due
	// instant) at Rate records/s for For, delays uniform in
	// [DelayMin, DelayMax].
	Rate     int            `json:"rate"`
	For      time.Duration  `json:"for"`
	DelayMin time.Duration  `json:"delay_min"`
	DelayMax time.Duration  `json:"delay_max"`
	Lateness LatencySummary `json:"lateness"`
	Lost     int            `json:"lost"`
	// ProduceLateness is the republisher's own view (produce instant
	// minus due instant).
	ProduceLateness LatencySummary `json:"produce_lateness"`
	ReleasedEarly   int64          `json:"released_early"`
	// MemoryRecords records of a BodySize body held in memory; Go heap
	// growth per record.
	MemoryRecords   int    `json:"memory_records"`
	MemoryPerRecord F      `json:"memory_per_record_bytes"`
	Err             string `json:"error,omitempty"`
}

const (
	kafkaBrokers    = 3
	kafkaPartitions = 6
)

// kafka runs the Kafka scenario on an in-process kfake cluster.
func (b *bench) kafka(ctx context.Context) {
	c := b.cfg
	res := &KafkaResult{Brokers: kafkaBrokers, Partitions: kafkaPartitions, N: c.KafkaN,
		Rate: c.KafkaRate, For: c.KafkaFor, DelayMin: c.KafkaDelayMin, DelayMax: c.KafkaDelayMax, MemoryRecords: c.KafkaMemory}
	b.rep.Kafka = res
	fail := func(format string, args ...any) {
		res.Err = fmt.Sprintf(format, args...)
		b.errorf("kafka: %s", res.Err)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(kafkaBrokers), kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(kafkaPartitions))
	if err != nil {
		fail("kfake: %v", err)
		return
	}
	defer cluster.Close()
	k := &kafkaBench{cluster: cluster, addrs: cluster.ListenAddrs(), body: make([]byte, c.BodySize)}
	for run := 0; run < c.Runs && ctx.Err() == nil; run++ {
		rp, fw, err := k.throughput(ctx, run, c.KafkaN)
		if err != nil {
			fail("throughput run %d: %v", run+1, err)
			return
		}
		res.Republisher = append(res.Republisher, F(rp))
		res.Forwarder = append(res.Forwarder, F(fw))
		b.logf("kafka throughput run %d: republisher %.0f/s, forwarder %.0f/s (%.2f×)", run+1, rp, fw, rp/fw)
	}
	res.Ratio = F(median(fs(res.Republisher)) / median(fs(res.Forwarder)))
	if ctx.Err() != nil {
		return
	}
	if err := k.lateness(ctx, res); err != nil {
		fail("lateness: %v", err)
		return
	}
	b.logf("kafka lateness at %d/s: p50 %.2f ms p99 %.2f ms max %.2f ms, early %v, lost %d", res.Rate,
		float64(res.Lateness.P50), float64(res.Lateness.P99), float64(res.Lateness.Max), res.ReleasedEarly, res.Lost)
	if ctx.Err() != nil {
		return
	}
	per, err := k.memory(ctx, c.KafkaMemory)
	if err != nil {
		fail("memory: %v", err)
		return
	}
	res.MemoryPerRecord = F(per)
	b.logf("kafka memory: %.0f bytes per in-flight record (%d records)", per, c.KafkaMemory)
}

type kafkaBench struct {
	cluster *kfake.Cluster
	addrs   []string
	body    []byte
}

func (k *kafkaBench) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.addrs...)}, opts...)...)
}

// quietLog drops the republisher's log lines.
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// bucketRecord builds a bucket record by hand, with ontime's headers.
func bucketRecord(topic, dest string, due time.Time, body []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Value: body, Headers: []kgo.RecordHeader{
		{Key: kafkadelay.HeaderDue, Value: []byte(strconv.FormatInt(due.UnixMilli(), 10))},
		{Key: kafkadelay.HeaderDestination, Value: []byte(dest)},
		{Key: kafkadelay.HeaderID, Value: []byte(uuid.NewString())},
	}}
}

// preload produces recs and waits for every ack.
func preload(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for _, r := range recs {
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				first.CompareAndSwap(nil, &err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return nil
}

// readyObserver closes a channel at the first assignment and counts
// releases.
type readyObserver struct {
	kafkadelay.BaseObserver
	once     sync.Once
	ready    chan struct{}
	released atomic.Int64
	mu       sync.Mutex
	late     []float64
}

func newReadyObserver() *readyObserver { return &readyObserver{ready: make(chan struct{})} }

func (o *readyObserver) Rebalanced(ev kafkadelay.Rebalance) {
	if ev.Kind == "assigned" && len(ev.Partitions) > 0 {
		o.once.Do(func() { close(o.ready) })
	}
}

func (o *readyObserver) Released(r kafkadelay.Release) {
	o.released.Add(1)
	o.mu.Lock()
	o.late = append(o.late, float64(r.Lateness())/1e6)
	o.mu.Unlock()
}

// startRepublisher runs a republisher of ladder until the returned stop is
// called.
func (k *kafkaBench) startRepublisher(ladder *kafkadelay.Ladder, group, dlq string, obs kafkadelay.Observer) (*kafkadelay.Republisher, func() error, error) {
	r, err := kafkadelay.NewRepublisher(kafkadelay.Config{Ladder: ladder, Group: group, DeadLetterTopic: dlq,
		Observer: obs, Logger: quietLog}, kgo.SeedBrokers(k.addrs...))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return r, func() error { cancel(); return <-done }, nil
}

// createTopics creates topics of kafkaPartitions partitions.
func (k *kafkaBench) createTopics(ctx context.Context, topics ...string) error {
	cl, err := k.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, kafkaPartitions, 1, nil, topics...)
	if err != nil {
		return err
	}
	return resp.Error()
}

// throughput preloads n due records into the smallest bucket and times the
// republisher moving them to a destination, then a plain forwarder moving
// the same n records (consume, produce, wait for the acks, commit).
func (k *kafkaBench) throughput(ctx context.Context, run, n int) (republisher, forwarder float64, err error) {
	prefix := fmt.Sprintf("tp%d.", run)
	ladder := kafkadelay.RecommendedLadder(prefix + "delay.")
	src := ladder.Topics()[0]
	dlq, destR, destF := prefix+"dead", prefix+"dest-r", prefix+"dest-f"
	if err := k.createTopics(ctx, append(ladder.Topics(), dlq, destR, destF)...); err != nil {
		return 0, 0, err
	}
	cl, err := k.client()
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	due := time.Now().Add(-time.Second)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = bucketRecord(src, destR, due, k.body)
	}
	if err := preload(ctx, cl, recs); err != nil {
		return 0, 0, err
	}

	obs := newReadyObserver()
	_, stop, err := k.startRepublisher(ladder, prefix+"republisher", dlq, obs)
	if err != nil {
		return 0, 0, err
	}
	select {
	case <-obs.ready:
	case <-time.After(30 * time.Second):
		_ = stop()
		return 0, 0, fmt.Errorf("the republisher got no partition within 30s")
	}
	start := time.Now()
	deadline := start.Add(3 * time.Minute)
	for obs.released.Load() < int64(n) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = stop()
			return 0, 0, fmt.Errorf("republisher released %d of %d", obs.released.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	republisher = float64(n) / time.Since(start).Seconds()
	if err := stop(); err != nil {
		return 0, 0, err
	}

	forwarder, err = k.forward(ctx, ladder.Topics(), destF, prefix+"forwarder", n)
	return republisher, forwarder, err
}

// forward is the baseline: a consumer group member of the same bucket
// topics as the republisher that, for each poll,
// produces every record to dest (acks from all in-sync replicas,
// idempotent), waits for the acks, and commits. It returns records/s once
// it has moved want records.
func (k *kafkaBench) forward(ctx context.Context, topics []string, dest, group string, want int) (float64, error) {
	ready := make(chan struct{})
	var once sync.Once
	cl, err := k.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ProducerLinger(0),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(ready) }) }))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("the forwarder got no partition within 30s")
	}
	start := time.Now()
	moved := 0
	deadline := time.Now().Add(3 * time.Minute)
	for moved < want {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("forwarder moved %d of %d", moved, want)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollRecords(pctx, 10000)
		cancel()
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		var wg sync.WaitGroup
		var failed atomic.Bool
		for _, r := range recs {
			out := &kgo.Record{Topic: dest, Key: r.Key, Value: r.Value, Headers: r.Headers}
			wg.Add(1)
			cl.Produce(ctx, out, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Store(true)
				}
				wg.Done()
			})
		}
		wg.Wait()
		if failed.Load() {
			return 0, fmt.Errorf("forwarder: a produce failed")
		}
		if err := cl.CommitRecords(ctx, recs...); err != nil {
			return 0, fmt.Errorf("forwarder commit: %w", err)
		}
		moved += len(recs)
	}
	return float64(moved) / time.Since(start).Seconds(), nil
}

// lateness publishes at a steady rate for res.For, delays uniform in
// [DelayMin, DelayMax], through the recommended ladder, and measures each
// record's receive instant at a destination consumer against its due
// instant.
func (k *kafkaBench) lateness(ctx context.Context, res *KafkaResult) error {
	ladder := kafkadelay.RecommendedLadder("lat.delay.")
	dest, dlq := "lat.dest", "lat.dead"
	if err := k.createTopics(ctx, append(ladder.Topics(), dest, dlq)...); err != nil {
		return err
	}
	obs := newReadyObserver()
	r, stop, err := k.startRepublisher(ladder, "lat.republisher", dlq, obs)
	if err != nil {
		return err
	}
	defer func() { _ = stop() }()
	<-obs.ready

	// The destination consumer.
	type recv struct {
		at  time.Time
		due time.Time
	}
	var mu sync.Mutex
	got := make(map[string]recv)
	ccl, err := k.client(kgo.ConsumeTopics(dest), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return err
	}
	defer ccl.Close()
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	go func() {
		for cctx.Err() == nil {
			fs := ccl.PollFetches(cctx)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				m, err := kafkadelay.ParseMeta(rec.Headers)
				if err != nil {
					return
				}
				if _, dup := got[m.ID]; !dup {
					got[m.ID] = recv{at: now, due: m.Due}
				}
			})
			mu.Unlock()
		}
	}()

	pcl, err := k.client()
	if err != nil {
		return err
	}
	defer pcl.Close()
	p, err := kafkadelay.NewProducer(pcl, ladder)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(42, 7))
	span := res.DelayMax - res.DelayMin
	interval := time.Second / time.Duration(res.Rate)
	start := time.Now()
	sent := 0
	var perr atomic.Pointer[error]
	for time.Since(start) < res.For && ctx.Err() == nil {
		// Publish what the schedule says is due by now (a steady rate
		// without one timer per record).
		target := int(time.Since(start) / interval)
		for ; sent < target; sent++ {
			d := res.DelayMin + time.Duration(rng.Int64N(int64(span)+1))
			out, err := p.Route(&kgo.Record{Topic: dest, Value: k.body}, time.Now().Add(d))
			if err != nil {
				return err
			}
			pcl.Produce(ctx, out, func(_ *kgo.Record, err error) {
				if err != nil {
					perr.CompareAndSwap(nil, &err)
				}
			})
		}
		time.Sleep(time.Millisecond)
	}
	if e := perr.Load(); e != nil {
		return *e
	}
	deadline := time.Now().Add(res.DelayMax + 30*time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= sent || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	ms := make([]float64, 0, len(got))
	for _, g := range got {
		ms = append(ms, float64(g.at.Sub(g.due))/1e6)
	}
	mu.Unlock()
	res.Lateness = summarize(ms)
	res.Lost = sent - len(ms)
	obs.mu.Lock()
	res.ProduceLateness = summarize(obs.late)
	obs.mu.Unlock()
	for _, st := range r.Stats() {
		res.ReleasedEarly += st.ReleasedEarly
	}
	return nil
}

// memory preloads n records due in 45s into a 60s bucket (the smallest,
// so the republisher reads them at once and holds them until due) and
// measures the Go heap's growth once the republisher holds them all.
func (k *kafkaBench) memory(ctx context.Context, n int) (float64, error) {
	ladder, err := kafkadelay.NewLadder(kafkadelay.Bucket{Delay: time.Minute, Topic: "mem.delay.60s"})
	if err != nil {
		return 0, err
	}
	dest, dlq := "mem.dest", "mem.dead"
	if err := k.createTopics(ctx, "mem.delay.60s", dest, dlq); err != nil {
		return 0, err
	}
	cl, err := k.client()
	if err != nil {
		return 0, err
	}
	due := time.Now().Add(45 * time.Second)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = bucketRecord("mem.delay.60s", dest, due, k.body)
	}
	err = preload(ctx, cl, recs)
	cl.Close()
	if err != nil {
		return 0, err
	}
	recs = nil
	before := heapInUse()
	r, stop, err := k.startRepublisher(ladder, "mem.republisher", dlq, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = stop() }()
	deadline := time.Now().Add(40 * time.Second)
	for {
		held := 0
		for _, st := range r.Stats() {
			held += st.Held
		}
		if held >= n {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("the republisher holds %d of %d records", held, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	after := heapInUse()
	return float64(after-before) / float64(n), nil
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
