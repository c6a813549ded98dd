package store

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestOpenRedisPassesShardsAndReplicas: redis_shards, wait_replicas and
// wait_timeout reach the Redis driver (OpenRedis does not contact Redis).
func TestOpenRedisPassesShardsAndReplicas(t *testing.T) {
	s, err := OpenRedis(RedisOptions{URL: "redis://127.0.0.1:1/0", Shards: map[string]int{"hot": 3, "b.*": 2}, WaitReplicas: 1, WaitTimeout: 250 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, ok := s.Driver.(*ontimeredis.Driver)
	if !ok {
		t.Fatalf("driver %T", s.Driver)
	}
	if d.ShardCount("hot") != 3 || d.ShardCount("b.x") != 2 || d.ShardCount("c") != 1 {
		t.Errorf("shard counts %d %d %d, want 3 2 1", d.ShardCount("hot"), d.ShardCount("b.x"), d.ShardCount("c"))
	}
	if o := d.Options(); o.WaitReplicas != 1 || o.WaitTimeout != 250*time.Millisecond {
		t.Errorf("WaitReplicas %d, WaitTimeout %v", o.WaitReplicas, o.WaitTimeout)
	}
	if _, err := OpenRedis(RedisOptions{URL: "redis://127.0.0.1:1/0", Layout: "compat", Shards: map[string]int{"hot": 3}}, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Error("the compat layout with shards opened")
	}
}
