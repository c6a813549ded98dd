package ontimeredis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestConformanceCluster runs the conformance and library suites on a
// Redis Cluster of three masters and three replicas (six processes). Topics
// hash to different masters; every key of one topic lands on one.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3, redistest.WithReplicas(3))
	t.Run("Library", func(t *testing.T) {
		t.Parallel()
		drivertest.RunLibrary(t, topologyHarness(func(tb testing.TB) redis.UniversalClient { return cluster.NewClient(tb) }, ontimeredis.Options{}))
	})
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

// TestClusterReplicaDown: with a replica of one master down (killed; the
// cluster has not yet marked it failed), every topic keeps working, on that
// master's slots and on the others', including after the masters forgot
// their scripts (SCRIPT FLUSH: NOSCRIPT, then the script is loaded where it
// runs). Scripts used to be loaded on every node, replicas included, before
// the first call and after a NOSCRIPT, so one unreachable replica stopped
// every topic.
func TestClusterReplicaDown(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3, redistest.WithReplicas(1), redistest.NodeTimeout(30*time.Second))
	cluster.Replicas[0].Kill()

	// Built as the README builds one.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	round := func(what string) {
		t.Helper()
		for i := range 12 {
			topic := fmt.Sprintf("replica-down.%d", i)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			_, err := d.Schedule(ctx, topic, []ontimedriver.NewTimer{{ID: "x", Payload: []byte("p")}}, ontimedriver.Upsert)
			var res *ontimedriver.ClaimResult
			if err == nil {
				res, err = d.Claim(ctx, topic, 10, time.Minute)
			}
			if err == nil && len(res.Timers) == 1 {
				_, err = d.Settle(ctx, topic, []ontimedriver.Settlement{{Lease: ontimedriver.Lease{ID: "x", Token: res.Timers[0].Token}}})
			}
			cancel()
			if err != nil {
				t.Fatalf("%s, topic %s, with a replica down: %v", what, topic, err)
			}
			if len(res.Timers) != 1 {
				t.Fatalf("%s, topic %s: claimed %d timers, want 1", what, topic, len(res.Timers))
			}
		}
	}
	round("first use")
	for _, s := range cluster.Servers {
		if err := s.NewClient(t).ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	round("after SCRIPT FLUSH on every master")
}
