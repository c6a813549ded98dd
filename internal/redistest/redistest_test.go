package redistest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
)

func TestMain(m *testing.M) { redistest.Main(m, redistest.CheckLeaks()) }

func TestSharedServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.NewClient(t)
	p := redistest.Prefix(t)
	if !strings.HasSuffix(p, ":") || p == redistest.Prefix(t) {
		t.Fatalf("prefix %q is not fresh", p)
	}
	if err := c.Set(ctx, p+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	keys, err := redistest.Keys(ctx, c, p)
	if err != nil || len(keys) != 1 || keys[0] != p+"k" {
		t.Fatalf("Keys = %v, %v", keys, err)
	}
	if err := redistest.DeleteKeys(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, p+"k").Val(); n != 0 {
		t.Fatalf("key survived DeleteKeys")
	}
	if redistest.Addr(t) == "" || !strings.HasPrefix(redistest.URL(t), "redis://") {
		t.Fatalf("Addr %q URL %q", redistest.Addr(t), redistest.URL(t))
	}
}

func TestEscapeGlob(t *testing.T) {
	t.Parallel()
	if got := redistest.EscapeGlob(`a*b?[c]\`); got != `a\*b\?\[c\]\\` {
		t.Fatalf("got %q", got)
	}
}

func TestDedicatedServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartServer(t, redistest.AppendOnly())
	c := s.NewClient(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// Pause: commands hang (time out), then work again.
	s.Pause()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.Get(short, "k").Err()
	cancel()
	if err == nil {
		t.Fatal("GET answered while paused")
	}
	s.Resume()
	wait.For(t, 5*time.Second, func() bool { return c.Get(ctx, "k").Val() == "v" }, "GET after Resume")

	// Kill and restart: the append-only file keeps the key.
	s.Kill()
	if s.Running() {
		t.Fatal("running after Kill")
	}
	short, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	err = c.Ping(short).Err()
	cancel()
	if err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Restart()
	wait.For(t, 5*time.Second, func() bool { return c.Get(ctx, "k").Val() == "v" }, "GET after Restart")

	s.Stop()
	s.Stop() // idempotent
}

// TestConfigFileAndTopology: a server started from a config file (as a
// Sentinel will be) reads it, and Server and Cluster are Topologies whose
// clients reach every node.
func TestConfigFileAndTopology(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartServer(t, redistest.ConfigFile("maxmemory 12mb\n"))
	var top redistest.Topology = s
	c := top.UniversalClient(t)
	got, err := c.ConfigGet(ctx, "maxmemory").Result()
	if err != nil || got["maxmemory"] != "12582912" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v; want the config file's 12mb", got, err)
	}
	if n := top.Nodes(); len(n) != 1 || n[0] != s {
		t.Fatalf("Nodes = %v", n)
	}
}

// TestSentinelFailover: the Sentinel setup settles, its failover client
// writes to the primary, and after the primary is killed the sentinels
// promote the replica, which has the write, and the client follows.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartSentinel(t)
	c := s.NewClient(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(ctx, 1, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if a, err := s.PrimaryAddr(ctx); err != nil || a != s.Primary.Addr {
		t.Fatalf("PrimaryAddr = %q, %v; want %s", a, err, s.Primary.Addr)
	}
	s.Primary.Kill()
	wait.For(t, 30*time.Second, func() bool {
		a, err := s.PrimaryAddr(ctx)
		return err == nil && a == s.Replicas[0].Addr
	}, "the replica promoted")
	wait.For(t, 30*time.Second, func() bool { return c.Get(ctx, "k").Val() == "v" }, "GET through the failover client after the failover")
	if !strings.HasPrefix(s.URL(), "redis+sentinel://127.0.0.1:") || len(s.Nodes()) != 5 {
		t.Fatalf("URL %q, %d nodes", s.URL(), len(s.Nodes()))
	}
}
