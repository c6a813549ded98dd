package ontimeredis_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// BenchmarkClusterTopicIndex measures what the topic index costs on a
// real 3-master Cluster: the shared driver benchmarks (package drivertest:
// one-timer publishes, 100-timer batches, concurrent publishers, 100-timer
// claim and ack) without the index ("off", Options.NoClusterTopicIndex)
// and with it ("on", the default), in the same run. With the index a call
// that moves a topic's head earlier writes a hint to the index's slot
// after its script, and the other hints go to the background writer
// (hintwriter.go). Besides the time, which this shared machine makes
// noisy, it reports what does not depend on the machine's load:
// "rtt/op", the client's round trips (a command or a pipeline sent to one
// node) per op, in the caller's path or in the background, and
// "cmds/op", the commands the masters ran per op (INFO commandstats); and
// "redis-µs/op", the masters' CPU (INFO cpu) per op.
//
//	go test -run '^$' -bench ClusterTopicIndex -count 3 ./ontimedriver/ontimeredis/
func BenchmarkClusterTopicIndex(b *testing.B) {
	cluster := redistest.StartCluster(b, 3)
	masters := make([]*redis.Client, 0, 3)
	for _, n := range cluster.Nodes() {
		masters = append(masters, n.NewClient(b))
	}
	for _, index := range []bool{false, true} {
		name := "off"
		if index {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			drivertest.Bench(b, drivertest.Harness{
				New: func(t testing.TB) ontimedriver.Driver {
					rdb := cluster.NewClient(t)
					rt := &roundTrips{}
					rdb.AddHook(rt)
					d, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet, NoClusterTopicIndex: !index})
					if err != nil {
						t.Fatal(err)
					}
					if bb, ok := t.(*testing.B); ok {
						reportClusterCosts(bb, masters, d, rt)
					}
					t.Cleanup(func() { _ = d.Close() })
					return d
				},
			})
		})
	}
}

// roundTrips counts the commands and pipelines a client sends.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// clusterCosts is what the masters did so far.
func clusterCosts(ctx context.Context, b *testing.B, masters []*redis.Client) (cpu float64, cmds int64) {
	for _, m := range masters {
		info, err := m.Info(ctx, "cpu", "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch {
			case k == "used_cpu_sys" || k == "used_cpu_user":
				f, _ := strconv.ParseFloat(v, 64)
				cpu += f
			case strings.HasPrefix(k, "cmdstat_") && k != "cmdstat_info":
				calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
				n, _ := strconv.ParseInt(calls, 10, 64)
				cmds += n
			}
		}
	}
	return cpu, cmds
}

// reportClusterCosts reports, when b's round ends, the masters' CPU and
// commands and the client's round trips per op. The driver is closed
// first, so that its background writes are counted.
func reportClusterCosts(b *testing.B, masters []*redis.Client, d *ontimeredis.Driver, rt *roundTrips) {
	ctx := context.Background()
	cpu0, cmds0 := clusterCosts(ctx, b, masters)
	b.Cleanup(func() {
		_ = d.Close()
		cpu, cmds := clusterCosts(ctx, b, masters)
		if b.N > 0 {
			b.ReportMetric((cpu-cpu0)*1e6/float64(b.N), "redis-µs/op")
			b.ReportMetric(float64(cmds-cmds0)/float64(b.N), "cmds/op")
			b.ReportMetric(float64(rt.n.Load())/float64(b.N), "rtt/op")
		}
	})
}
