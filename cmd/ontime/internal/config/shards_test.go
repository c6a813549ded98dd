package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
)

// TestShardsAndReplicasConfig: redis_shards, wait_replicas and
// wait_timeout load from the file and from their env/flag form, and bad
// values are refused naming the key.
func TestShardsAndReplicasConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ontime.toml")
	text := `redis = "redis://127.0.0.1:6379"
wait_replicas = 1
wait_timeout = "250ms"
[redis_shards]
clicks = 3
"orders.*" = 2
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg config.Config
	if err := cfg.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	cfg.Fill()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.RedisShards["clicks"] != 3 || cfg.RedisShards["orders.*"] != 2 || cfg.WaitReplicas != 1 || cfg.WaitTimeout.D() != 250*time.Millisecond {
		t.Errorf("loaded %v, %d, %v", cfg.RedisShards, cfg.WaitReplicas, cfg.WaitTimeout.D())
	}

	env := map[string]string{"ONTIME_REDIS_SHARDS": "hot=4, b*=2", "ONTIME_WAIT_REPLICAS": "2", "ONTIME_WAIT_TIMEOUT": "2s"}
	if err := cfg.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if len(cfg.RedisShards) != 2 || cfg.RedisShards["hot"] != 4 || cfg.RedisShards["b*"] != 2 || cfg.WaitReplicas != 2 || cfg.WaitTimeout.D() != 2*time.Second {
		t.Errorf("from the environment: %v, %d, %v", cfg.RedisShards, cfg.WaitReplicas, cfg.WaitTimeout.D())
	}
	if err := cfg.Set("redis_shards", "hot"); err == nil {
		t.Error(`redis_shards "hot" (no count) accepted`)
	}

	for _, c := range []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"count 0", func(c *config.Config) { c.RedisShards = map[string]int{"a": 0} }, `redis_shards "a" = 0`},
		{"bad topic", func(c *config.Config) { c.RedisShards = map[string]int{"a b": 2} }, `redis_shards "a b"`},
		{"embedded store", func(c *config.Config) { c.Redis = ""; c.RedisShards = map[string]int{"a": 2} }, "redis_shards: sharded topics need the Redis store"},
		{"compat", func(c *config.Config) { c.RedisLayout = "compat"; c.RedisShards = map[string]int{"a": 2} }, "native layout"},
		{"negative replicas", func(c *config.Config) { c.WaitReplicas = -1 }, "wait_replicas -1"},
		{"replicas of the embedded store", func(c *config.Config) { c.Redis = ""; c.WaitReplicas = 1 }, "wait_replicas: the embedded store"},
	} {
		cfg := config.Config{Redis: "redis://127.0.0.1:6379"}
		c.set(&cfg)
		cfg.Fill()
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestClassicPubSubConfig: redis_classic_pubsub loads from the file and
// from ONTIME_REDIS_CLASSIC_PUBSUB, a value that is not a boolean is
// refused, and so is the key without the Redis store.
func TestClassicPubSubConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ontime.toml")
	if err := os.WriteFile(path, []byte("redis = \"redis+cluster://127.0.0.1:7000\"\nredis_classic_pubsub = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg config.Config
	if err := cfg.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	cfg.Fill()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.RedisClassicPubSub {
		t.Error("redis_classic_pubsub = true not loaded")
	}
	env := map[string]string{"ONTIME_REDIS_CLASSIC_PUBSUB": "false"}
	if err := cfg.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if cfg.RedisClassicPubSub {
		t.Error("ONTIME_REDIS_CLASSIC_PUBSUB=false not applied")
	}
	if err := cfg.Set("redis_classic_pubsub", "sometimes"); err == nil || !strings.Contains(err.Error(), "not a boolean") {
		t.Errorf(`redis_classic_pubsub "sometimes": %v, want "not a boolean"`, err)
	}
	embedded := config.Config{RedisClassicPubSub: true}
	embedded.Fill()
	if err := embedded.Validate(); err == nil || !strings.Contains(err.Error(), "redis_classic_pubsub") {
		t.Errorf("redis_classic_pubsub on the embedded store: %v, want an error naming the key", err)
	}
}
