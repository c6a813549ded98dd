package ontimeredis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestConformanceCluster runs the conformance suite on a Redis Cluster of
// three masters (three processes). Topics hash to different masters; every
// key of one topic lands on one.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
	var mu sync.Mutex
	made := map[ontimedriver.Driver]ontimeredis.Options{}
	open := func(t testing.TB, o ontimeredis.Options) *ontimeredis.Driver {
		d, err := ontimeredis.New(cluster.NewClient(t), &o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		mu.Lock()
		made[d] = d.Options()
		mu.Unlock()
		return d
	}
	drivertest.Run(t, drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			return open(t, ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet})
		},
		NewPeer: func(t testing.TB, d ontimedriver.Driver) ontimedriver.Driver {
			mu.Lock()
			o := made[d]
			mu.Unlock()
			return open(t, o)
		},
	})
	t.Run("TopicsSpreadOverMasters", func(t *testing.T) {
		ctx := context.Background()
		d := open(t, ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet})
		var topics []string
		for i := range 12 {
			topic := fmt.Sprintf("spread.%d", i)
			topics = append(topics, topic)
			if _, err := d.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
				t.Fatal(err)
			}
		}
		got, err := d.Topics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(topics) {
			t.Fatalf("Topics = %v, want %d topics", got, len(topics))
		}
		used := map[string]bool{}
		for _, s := range cluster.Servers {
			n, err := s.NewClient(t).DBSize(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				used[s.Addr] = true
			}
		}
		if len(used) < 2 {
			t.Errorf("12 topics used %d of 3 masters", len(used))
		}
		res, err := d.Claim(ctx, "spread.7", 10, time.Minute)
		if err != nil || len(res.Timers) != 1 {
			t.Fatalf("claim on a cluster: %v %v", res, err)
		}
	})
}
