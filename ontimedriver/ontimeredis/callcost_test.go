package ontimeredis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// BenchmarkCallCost measures the Redis server's script time per call of
// the hot path with one timer per call (schedule, claim, ack), where a
// fixed cost per call (such as the topic index writes) shows most; with
// larger batches it is shared by the batch. One op is one timer through
// the three calls; each phase reports its scripts' time per call (INFO
// commandstats, evalsha usec) on a dedicated server.
//
//	go test -run '^$' -bench CallCost -benchtime 20000x ./ontimedriver/ontimeredis/
func BenchmarkCallCost(b *testing.B) {
	redistest.RequireRedis(b)
	srv := redistest.StartServer(b)
	rdb := srv.NewClient(b)
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	usec := func() float64 {
		info, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "cmdstat_evalsha:"); ok {
				for _, kv := range strings.Split(v, ",") {
					if s, ok := strings.CutPrefix(kv, "usec="); ok {
						f, _ := strconv.ParseFloat(s, 64)
						return f
					}
				}
			}
		}
		return 0
	}
	payload := make([]byte, 100)
	// warm the script cache
	if _, err := d.Claim(ctx, "cost", 1, time.Minute); err != nil {
		b.Fatal(err)
	}
	n := b.N
	var sch, cl, ack float64
	b.ResetTimer()
	for i := range n {
		u0 := usec()
		if _, err := d.Schedule(ctx, "cost", []ontimedriver.NewTimer{{ID: fmt.Sprint(i), Payload: payload}}, ontimedriver.Upsert); err != nil {
			b.Fatal(err)
		}
		u1 := usec()
		res, err := d.Claim(ctx, "cost", 1, time.Minute)
		if err != nil || len(res.Timers) != 1 {
			b.Fatal(res, err)
		}
		u2 := usec()
		if _, err := d.Settle(ctx, "cost", []ontimedriver.Settlement{{Lease: ontimedriver.Lease{ID: res.Timers[0].ID, Token: res.Timers[0].Token}}}); err != nil {
			b.Fatal(err)
		}
		u3 := usec()
		sch += u1 - u0
		cl += u2 - u1
		ack += u3 - u2
	}
	b.StopTimer()
	b.ReportMetric(sch/float64(n), "schedule_us/call")
	b.ReportMetric(cl/float64(n), "claim_us/call")
	b.ReportMetric(ack/float64(n), "ack_us/call")
}
