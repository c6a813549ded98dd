package ontimeredis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
	"github.com/redis/go-redis/v9"
)

// BenchmarkCountTopics counts 5,000 topics (one timer each, one topic in
// ten with a live lease) on a dedicated redis-server: CountTopics as one
// Redis runs it ("script"), as a Cluster runs it ("pipeline", the driver
// made to keep the index by hints), and one Count per topic ("each", the
// baseline). It reports Redis's process CPU per call (INFO cpu: commands,
// scripts, parsing and replies) besides ns/op.
func BenchmarkCountTopics(b *testing.B) {
	redistest.RequireRedis(b)
	srv := redistest.StartServer(b)
	rdb := srv.NewClient(b)
	ctx := context.Background()
	const n = 5000
	topics := make([]string, n)
	for i := range topics {
		topics[i] = fmt.Sprintf("tenant-%05d", i)
	}
	setup, err := ontimeredis.New(rdb, &ontimeredis.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				ts := []ontimedriver.NewTimer{{ID: "x", Delay: time.Hour}}
				if i%10 == 0 {
					ts = []ontimedriver.NewTimer{{ID: "x"}, {ID: "y", Delay: time.Hour}}
				}
				if _, err := setup.Schedule(ctx, topics[i], ts, ontimedriver.Upsert); err != nil {
					b.Error(err)
					return
				}
				if i%10 == 0 {
					if _, err := setup.Claim(ctx, topics[i], 1, time.Hour); err != nil {
						b.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	_ = setup.Close()
	for _, c := range []struct {
		name  string
		hints bool
		each  bool
	}{{"script", false, false}, {"pipeline", true, false}, {"each", false, true}} {
		b.Run(c.name, func(b *testing.B) {
			d, err := ontimeredis.New(rdb, &ontimeredis.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = d.Close() })
			if c.hints {
				ontimeredis.UseIndexHints(d)
			}
			count := func() {
				if c.each {
					for _, t := range topics {
						if _, err := d.Count(ctx, t); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				got, err := d.CountTopics(ctx, topics)
				if err != nil {
					b.Fatal(err)
				}
				if got[0] != (ontimedriver.Counts{Scheduled: 1, Leased: 1}) || got[1] != (ontimedriver.Counts{Scheduled: 1}) {
					b.Fatalf("counts %+v %+v", got[0], got[1])
				}
			}
			count() // loads the scripts
			cpu := redisCPU(b, rdb)
			for b.Loop() {
				count()
			}
			b.ReportMetric((redisCPU(b, rdb)-cpu)/float64(b.N), "redis-cpu-µs/op")
		})
	}
}

// redisCPU is the CPU time the redis-server process used so far (INFO
// cpu, user and system), in microseconds.
func redisCPU(tb testing.TB, rdb redis.UniversalClient) float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var us float64
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatalf("INFO cpu line %q", line)
			}
			us += f * 1e6
		}
	}
	return us
}
