package ontimeredis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
	"github.com/ontime-go/ontime/schedule"
)

// TestWaitReplicas checks that a publish that asks for replica
// acknowledgement returns once the replica has the timer, and fails with
// ErrNotReplicated (the timer on the primary) when too few replicas exist.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := redistest.StartServer(t)
	replica := redistest.StartReplica(t, primary)
	rc := replica.NewClient(t)

	d, err := ontimeredis.New(primary.NewClient(t), &ontimeredis.Options{Logger: quiet, WaitReplicas: 1, WaitTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	// a fresh script (NOSCRIPT, then EVAL) waits too
	for i := range 20 {
		id := fmt.Sprintf("t%d", i)
		if _, err := d.Schedule(ctx, "w", []ontimedriver.NewTimer{{ID: id, Delay: time.Hour, Payload: []byte("p")}}, ontimedriver.Upsert); err != nil {
			t.Fatal(err)
		}
		// acknowledged: the replica has it, now
		if n, err := rc.HExists(ctx, "ontime:{w}:msg", id).Result(); err != nil || !n {
			t.Fatalf("after an acknowledged publish of %s the replica has it: %v, %v", id, n, err)
		}
	}

	// more replicas than there are: the write stays on the primary, the
	// call fails
	d2, err := ontimeredis.New(primary.NewClient(t), &ontimeredis.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.Close() })
	wctx := ontimedriver.WithReplicaAck(ctx, ontimedriver.ReplicaAck{Replicas: 2, Timeout: 50 * time.Millisecond})
	_, err = d2.Schedule(wctx, "w", []ontimedriver.NewTimer{{ID: "two", Payload: []byte("p")}}, ontimedriver.Upsert)
	if !errors.Is(err, ontimedriver.ErrNotReplicated) {
		t.Fatalf("schedule asking for 2 replicas of 1: %v, want ErrNotReplicated", err)
	}
	if _, err := d2.Get(ctx, "w", "two"); err != nil {
		t.Errorf("the timer not acknowledged by enough replicas is on the primary: %v", err)
	}

	// through the library's publish option
	c, err := ontime.NewClient(d2, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Publish(ctx, "lib", "body", ontime.In(time.Hour), ontime.WaitReplicas(1, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := rc.HExists(ctx, "ontime:{lib}:msg", id).Result(); err != nil || !n {
		t.Errorf("after Publish with WaitReplicas(1) the replica has the timer: %v, %v", n, err)
	}
	if _, err := c.Publish(ctx, "lib", "body", ontime.WaitReplicas(3, 20*time.Millisecond)); !errors.Is(err, ontimedriver.ErrNotReplicated) {
		t.Errorf("Publish with WaitReplicas(3) of 1 replica: %v, want ErrNotReplicated", err)
	}
	if _, err := c.Publish(ctx, "lib", "body", ontime.WaitReplicas(-1, 0)); !errors.Is(err, ontime.ErrInvalid) {
		t.Errorf("WaitReplicas(-1): %v, want ErrInvalid", err)
	}
	// a recurring timer waits too
	if _, err := c.PublishRecurring(ctx, "lib", "hourly", schedule.Every(time.Hour), "body", ontime.WaitReplicas(1, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := rc.HExists(ctx, "ontime:{lib}:sched", "hourly").Result(); err != nil || !n {
		t.Errorf("after PublishRecurring with WaitReplicas(1) the replica has its schedule entry: %v, %v", n, err)
	}
	if _, err := c.PublishRecurring(ctx, "lib", "hourly", schedule.Every(time.Hour), "body", ontime.WaitReplicas(3, 20*time.Millisecond)); !errors.Is(err, ontimedriver.ErrNotReplicated) {
		t.Errorf("PublishRecurring with WaitReplicas(3) of 1 replica: %v, want ErrNotReplicated", err)
	}
	if _, err := c.PublishRecurring(ctx, "lib", "hourly", schedule.Every(time.Hour), "body", ontime.WaitReplicas(-1, 0)); !errors.Is(err, ontime.ErrInvalid) {
		t.Errorf("PublishRecurring with WaitReplicas(-1): %v, want ErrInvalid", err)
	}
}

// TestWaitReplicasClusterSharded publishes to a sharded topic on a Cluster
// with a replica per master, waiting for one replica: every shard's
// replica has its timers when the publish returns.
func TestWaitReplicasClusterSharded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := redistest.StartCluster(t, 3, redistest.WithReplicas(3))
	prefix := redistest.Prefix(t)
	d, err := ontimeredis.New(cluster.NewClient(t), &ontimeredis.Options{Prefix: prefix, Logger: quiet, Shards: map[string]int{"hot": 3}, WaitReplicas: 1, WaitTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	var timers []ontimedriver.NewTimer
	for i := range 300 {
		timers = append(timers, ontimedriver.NewTimer{ID: fmt.Sprintf("t%d", i), Delay: time.Hour, Payload: []byte("p")})
	}
	if _, err := d.Schedule(ctx, "hot", timers, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}
	var onReplicas int64
	for _, r := range cluster.Replicas {
		rc := r.NewClient(t)
		for _, name := range ontimeredis.ShardNames(d, "hot") {
			key := prefix + "{" + name + "}:due"
			// a replica answers for its master's slots after READONLY
			// (on the same connection: one pipeline), and redirects the
			// others, which count as none
			pipe := rc.Pipeline()
			pipe.Do(ctx, "READONLY")
			c := pipe.ZCard(ctx, key)
			_, _ = pipe.Exec(ctx)
			onReplicas += c.Val()
		}
	}
	if onReplicas != int64(len(timers)) {
		t.Errorf("the replicas hold %d of the %d acknowledged timers", onReplicas, len(timers))
	}
}
