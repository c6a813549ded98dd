package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// MasterName is the name the sentinels of [StartSentinel] monitor the
// primary under.
const MasterName = "mymaster"

// Sentinel is a Redis Sentinel setup owned by a test: a primary, its
// replicas and the sentinels that watch them (quorum 2 of 3), every one a
// redis-server process on a free loopback port. The sentinels mark the
// primary down after DownAfter without an answer and then promote a
// replica.
type Sentinel struct {
	// Primary is the primary the setup started with. After a failover the
	// primary is another server: ask the sentinels (PrimaryAddr).
	Primary *Server
	// Replicas replicate the primary.
	Replicas []*Server
	// Sentinels watch the primary (run with redis-server --sentinel).
	Sentinels []*Server

	downAfter time.Duration
	replicas  int
	sentinels int
	server    []ServerOption
}

// SentinelOption configures StartSentinel.
type SentinelOption func(*Sentinel)

// DownAfter sets the sentinels' down-after-milliseconds (default 1 s): how
// long the primary may not answer before a sentinel thinks it down.
func DownAfter(d time.Duration) SentinelOption { return func(s *Sentinel) { s.downAfter = d } }

// SentinelReplicas sets the number of replicas (default 1).
func SentinelReplicas(n int) SentinelOption { return func(s *Sentinel) { s.replicas = n } }

// DataServerOptions are given to the primary and the replicas (not to the
// sentinels): AppendOnly, Args, ...
func DataServerOptions(opts ...ServerOption) SentinelOption {
	return func(s *Sentinel) { s.server = append(s.server, opts...) }
}

// StartSentinel starts a primary, its replicas (one by default) and three
// sentinels, and waits until every sentinel knows the primary, its
// replicas and the other sentinels (so that a failover can be agreed at
// once). Every process is stopped when tb ends.
func StartSentinel(tb testing.TB, opts ...SentinelOption) *Sentinel {
	tb.Helper()
	s := &Sentinel{downAfter: time.Second, replicas: 1, sentinels: 3}
	for _, o := range opts {
		o(s)
	}
	data := append([]ServerOption{Args(
		"--repl-diskless-sync", "yes",
		"--repl-diskless-sync-delay", "0",
		"--repl-ping-replica-period", "1",
	)}, s.server...)
	s.Primary = StartServer(tb, data...)
	host, port, _ := strings.Cut(s.Primary.Addr, ":")
	for range s.replicas {
		s.Replicas = append(s.Replicas, StartServer(tb, append(data, Args("--replicaof", host, port))...))
	}
	conf := fmt.Sprintf("sentinel monitor %s %s %s 2\n"+
		"sentinel down-after-milliseconds %s %d\n"+
		"sentinel failover-timeout %s 10000\n"+
		"sentinel parallel-syncs %s 1\n",
		MasterName, host, port, MasterName, s.downAfter.Milliseconds(), MasterName, MasterName)
	for range s.sentinels {
		s.Sentinels = append(s.Sentinels, StartServer(tb, ConfigFile(conf), Args("--sentinel")))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.settle(ctx); err != nil {
		tb.Fatalf("redistest: the Sentinel setup did not settle: %v", err)
	}
	return s
}

// settle waits until every sentinel sees the primary, every replica online
// and the other sentinels.
func (s *Sentinel) settle(ctx context.Context) error {
	for _, sn := range s.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr})
		var last string
		for {
			m, err := c.Master(ctx, MasterName).Result()
			reps, rerr := c.Replicas(ctx, MasterName).Result()
			online := 0
			for _, r := range reps {
				if !strings.Contains(r["flags"], "down") && !strings.Contains(r["flags"], "disconnected") && r["master-link-status"] == "ok" {
					online++
				}
			}
			if err == nil && rerr == nil && m["num-other-sentinels"] == strconv.Itoa(len(s.Sentinels)-1) && online >= len(s.Replicas) {
				break
			}
			last = fmt.Sprintf("master %v (%v), replicas online %d (%v)", m, err, online, rerr)
			select {
			case <-ctx.Done():
				_ = c.Close()
				return fmt.Errorf("sentinel %s: %s", sn.Addr, last)
			case <-time.After(100 * time.Millisecond):
			}
		}
		_ = c.Close()
	}
	return nil
}

// SentinelAddrs lists the sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	a := make([]string, len(s.Sentinels))
	for i, sn := range s.Sentinels {
		a[i] = sn.Addr
	}
	return a
}

// URL returns the redis+sentinel:// URL of the setup, as ontime serve
// reads it: redis+sentinel://sentinel1,sentinel2,sentinel3/mymaster.
func (s *Sentinel) URL() string {
	return "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + MasterName
}

// PrimaryAddr asks the sentinels which server is the primary now.
func (s *Sentinel) PrimaryAddr(ctx context.Context) (string, error) {
	var err error
	for _, sn := range s.Sentinels {
		if !sn.Running() {
			continue
		}
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr})
		var a []string
		a, err = c.GetMasterAddrByName(ctx, MasterName).Result()
		_ = c.Close()
		if err == nil && len(a) == 2 {
			return a[0] + ":" + a[1], nil
		}
	}
	return "", fmt.Errorf("no sentinel answered: %v", err)
}

// Server returns the data server (primary or replica) at addr, or nil.
func (s *Sentinel) Server(addr string) *Server {
	for _, d := range append([]*Server{s.Primary}, s.Replicas...) {
		if d.Addr == addr {
			return d
		}
	}
	return nil
}

// NewClient returns a client of the primary through the sentinels
// (go-redis's failover client: it follows a failover), closed when tb
// ends. Its options suit tests that break servers: short timeouts, and
// context deadlines are honoured.
func (s *Sentinel) NewClient(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            MasterName,
		SentinelAddrs:         s.SentinelAddrs(),
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		ContextTimeoutEnabled: true,
	})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// UniversalClient is NewClient as a redis.UniversalClient (see [Topology]).
func (s *Sentinel) UniversalClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	return s.NewClient(tb)
}

// Nodes lists every process: the primary, the replicas, then the
// sentinels (see [Topology]).
func (s *Sentinel) Nodes() []*Server {
	n := append([]*Server{s.Primary}, s.Replicas...)
	return append(n, s.Sentinels...)
}
