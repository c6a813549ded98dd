package ontimeredis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// masterStats is what one master's INFO says about the work it did.
type masterStats struct {
	cpu   float64 // used_cpu_sys + used_cpu_user, seconds
	calls int64   // script calls (evalsha + eval)
	usec  int64   // time in those calls, µs
}

func readMasterStats(ctx context.Context, b *testing.B, c *redis.Client) masterStats {
	b.Helper()
	info, err := c.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var s masterStats
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += f
		case "cmdstat_evalsha", "cmdstat_eval":
			for field := range strings.SplitSeq(v, ",") {
				fk, fv, _ := strings.Cut(field, "=")
				n, _ := strconv.ParseInt(fv, 10, 64)
				switch fk {
				case "calls":
					s.calls += n
				case "usec":
					s.usec += n
				}
			}
		}
	}
	return s
}

// BenchmarkShardedTopic runs one topic end to end (publish b.N timers due
// now in batches of 500, then one worker fires and acks them all) on a
// 3-master Cluster: "unsharded" keeps the topic on one master, "sharded3"
// spreads it over 3 shards, one per master. Per master it reports the
// share of the script time (INFO commandstats, evalsha + eval usec), and
// the Redis CPU (INFO cpu, used_cpu_sys + used_cpu_user) per timer that
// master held; "proj-timers/s" is the rate one core per master would
// allow: the least, over the masters, of 1 s of CPU divided by the CPU
// that master spends per timer of the topic (its CPU over b.N).
//
//	go test -run '^$' -bench ShardedTopic -benchtime 60000x ./ontimedriver/ontimeredis/
func BenchmarkShardedTopic(b *testing.B) {
	cluster := redistest.StartCluster(b, 3)
	for _, shards := range []int{1, 3} {
		name := "unsharded"
		if shards > 1 {
			name = fmt.Sprintf("sharded%d", shards)
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			rdb := cluster.NewClient(b)
			o := &ontimeredis.Options{Prefix: redistest.Prefix(b), Logger: quiet}
			if shards > 1 {
				o.Shards = map[string]int{"hot": shards}
			}
			d, err := ontimeredis.New(rdb, o)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = d.Close() })
			c, err := ontime.NewClient(d, &ontime.Config{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			// the masters, by address, and the master of each timer
			masters := make([]*redis.Client, len(cluster.Servers))
			index := map[string]int{}
			for i, s := range cluster.Servers {
				masters[i] = s.NewClient(b)
				index[s.Addr] = i
			}
			masterOf := func(key string) int {
				m, err := rdb.MasterForKey(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				return index[m.Options().Addr]
			}
			ids := make([]string, b.N)
			held := make([]int, len(masters))
			var shardMaster []int
			for _, n := range ontimeredis.ShardNames(d, "hot") {
				shardMaster = append(shardMaster, masterOf(o.Prefix+"{"+n+"}:due"))
			}
			plain := masterOf(o.Prefix + "{hot}:due")
			for i := range ids {
				ids[i] = "t" + strconv.Itoa(i)
				if shards > 1 {
					held[shardMaster[ontimeredis.ShardOf(d, "hot", ids[i])]]++
				} else {
					held[plain]++
				}
			}

			var done atomic.Int64
			all := make(chan struct{})
			n := int64(b.N)
			w := ontime.NewWorker(c, &ontime.WorkerConfig{Logger: quiet})
			if err := ontime.Handle(w, "hot", func(ctx context.Context, m *ontime.Message[[]byte]) error {
				if done.Add(1) == n {
					close(all)
				}
				return nil
			}, &ontime.TopicOptions{MaxConcurrency: 512, ClaimBatch: 512}); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 100)
			before := make([]masterStats, len(masters))
			for i, m := range masters {
				before[i] = readMasterStats(ctx, b, m)
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i += 500 {
				batch := make([]ontime.Timer, 0, 500)
				for j := i; j < min(i+500, b.N); j++ {
					batch = append(batch, ontime.Timer{ID: ids[j], Body: body})
				}
				if _, err := c.PublishBatch(ctx, "hot", batch); err != nil {
					b.Fatal(err)
				}
			}
			rctx, cancel := context.WithCancel(ctx)
			stopped := make(chan struct{})
			go func() { _ = w.Run(rctx); close(stopped) }()
			select {
			case <-all:
			case <-time.After(5 * time.Minute):
				b.Fatalf("fired %d of %d", done.Load(), b.N)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			cancel()
			<-stopped
			var usec int64
			delta := make([]masterStats, len(masters))
			for i, m := range masters {
				a := readMasterStats(ctx, b, m)
				delta[i] = masterStats{cpu: a.cpu - before[i].cpu, calls: a.calls - before[i].calls, usec: a.usec - before[i].usec}
				usec += delta[i].usec
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "timers/s")
			proj := 0.0
			for i, dm := range delta {
				b.ReportMetric(100*float64(dm.usec)/float64(usec), fmt.Sprintf("m%d-script-%%", i))
				b.ReportMetric(100*float64(held[i])/float64(b.N), fmt.Sprintf("m%d-timers-%%", i))
				b.ReportMetric(dm.cpu*1e6/float64(b.N), fmt.Sprintf("m%d-cpu-µs/topic-timer", i))
				if held[i] > 0 {
					b.ReportMetric(dm.cpu*1e6/float64(held[i]), fmt.Sprintf("m%d-cpu-µs/own-timer", i))
				}
				// the rate at which this master would be busy one core
				if perTimer := dm.cpu / float64(b.N); perTimer > 0 && held[i] > 0 {
					if r := 1 / perTimer; proj == 0 || r < proj {
						proj = r
					}
				}
			}
			b.ReportMetric(proj, "proj-timers/s")
		})
	}
}
