package ontime

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// countingDriver counts the Schedule calls that reach the real store under
// it and the timers they carry.
type countingDriver struct {
	ontimedriver.Driver
	calls, timers atomic.Int64
	busy          atomic.Int64 // ns spent in Schedule, summed over calls
}

func (d *countingDriver) Unwrap() ontimedriver.Driver { return d.Driver }

func (d *countingDriver) Schedule(ctx context.Context, topic string, ts []ontimedriver.NewTimer, m ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	d.calls.Add(1)
	d.timers.Add(int64(len(ts)))
	start := time.Now()
	defer func() { d.busy.Add(int64(time.Since(start))) }()
	return d.Driver.Schedule(ctx, topic, ts, m)
}

// BenchmarkPublishCallers measures one-by-one Publish (one timer per call,
// due in an hour, a 100-byte body) from 1, 16 and 64 concurrent callers on
// a dedicated redis-server and on the embedded store (fsync on). One op is
// one Publish. "direct" makes one driver Schedule call per timer, as
// Publish did before it coalesced concurrent calls. Metrics: timers per
// store call, and on Redis the server's CPU per timer.
//
//	go test -run '^$' -bench PublishCallers -benchtime 3s -benchmem .
func BenchmarkPublishCallers(b *testing.B) {
	body := []byte(strings.Repeat("x", 100))
	for _, store := range []string{"redis", "bolt"} {
		for _, direct := range []bool{false, true} {
			for _, callers := range []int{1, 16, 64} {
				name := store
				if direct {
					name += "-direct"
				}
				b.Run(name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
					var drv ontimedriver.Driver
					var rdb *redis.Client
					switch store {
					case "redis":
						redistest.RequireRedis(b)
						srv := redistest.StartServer(b)
						// Default options, as most programs have them: go-redis
						// does not end a command at its context's deadline.
						rdb = redis.NewClient(&redis.Options{Addr: srv.Addr})
						defer rdb.Close()
						d, err := ontimeredis.New(rdb, &ontimeredis.Options{Logger: quietLog})
						if err != nil {
							b.Fatal(err)
						}
						drv = d
					case "bolt":
						d, err := ontimebolt.Open(filepath.Join(b.TempDir(), "timers.db"), &ontimebolt.Options{Logger: quietLog})
						if err != nil {
							b.Fatal(err)
						}
						drv = d
					}
					defer drv.Close()
					cd := &countingDriver{Driver: drv}
					c, err := NewClient(cd, &Config{Logger: quietLog})
					if err != nil {
						b.Fatal(err)
					}
					// A context that can end, as a server's request has.
					ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
					defer cancel()
					due := time.Now().Add(time.Hour)
					// One publish before the clock starts: the topic is
					// registered, the connections are open.
					if _, err := c.Publish(ctx, "bench", body, At(due)); err != nil {
						b.Fatal(err)
					}
					cd.calls.Store(0)
					cd.timers.Store(0)
					cpu0 := redisCPU(b, rdb)
					var left atomic.Int64
					left.Store(int64(b.N))
					var wg sync.WaitGroup
					var failed atomic.Value
					b.ResetTimer()
					begin := time.Now()
					cd.busy.Store(0)
					for range callers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for left.Add(-1) >= 0 {
								var err error
								if direct {
									err = directPublish(ctx, c, "bench", body, due)
								} else {
									_, err = c.Publish(ctx, "bench", body, At(due))
								}
								if err != nil {
									failed.Store(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					b.StopTimer()
					elapsed := time.Since(begin)
					if err, _ := failed.Load().(error); err != nil {
						b.Fatal(err)
					}
					if n := cd.calls.Load(); n > 0 {
						b.ReportMetric(float64(cd.timers.Load())/float64(n), "timers/call")
						b.ReportMetric(float64(cd.busy.Load())/float64(elapsed), "in-store")
						b.ReportMetric(float64(cd.busy.Load())/float64(n)/1e3, "µs/call")
					}
					if rdb != nil {
						b.ReportMetric((redisCPU(b, rdb)-cpu0)*1e6/float64(b.N), "redis-µs/op")
					}
				})
			}
		}
	}
}

// directPublish writes one timer in its own store call, encoded as
// Publish encodes it.
func directPublish(ctx context.Context, c *Client, topic string, body []byte, due time.Time) error {
	nt, err := c.encodeTimer(&Timer{ID: newID(), Body: body, At: due})
	if err != nil {
		return err
	}
	res, err := c.drv.Schedule(ctx, topic, []ontimedriver.NewTimer{nt}, ontimedriver.Upsert)
	if err != nil {
		return err
	}
	return res[0].Err
}

// redisCPU is the server's CPU seconds so far (user + sys), or 0 without a
// Redis.
func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	if rdb == nil {
		return 0
	}
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			sum += f
		}
	}
	return sum
}
