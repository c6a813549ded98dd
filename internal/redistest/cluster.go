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

// Cluster is a Redis Cluster owned by a test: masters, and replicas of
// them if asked for.
type Cluster struct {
	// Servers are the masters.
	Servers []*Server
	// Replicas are the replicas, in order: Replicas[i] replicates
	// Servers[i%len(Servers)].
	Replicas []*Server

	nodeTimeout time.Duration
	server      []ServerOption
}

// ClusterOption configures StartCluster.
type ClusterOption func(*Cluster)

// WithReplicas gives the cluster n replicas, spread over the masters in
// order (the first replicates the first master, ...).
func WithReplicas(n int) ClusterOption { return func(c *Cluster) { c.Replicas = make([]*Server, n) } }

// NodeTimeout sets cluster-node-timeout (default 3 s): a node that does not
// answer for that long is marked failed by the others.
func NodeTimeout(d time.Duration) ClusterOption { return func(c *Cluster) { c.nodeTimeout = d } }

// ClusterServerOptions are given to every node, masters and replicas:
// AppendOnly, Args, ...
func ClusterServerOptions(opts ...ServerOption) ClusterOption {
	return func(c *Cluster) { c.server = append(c.server, opts...) }
}

// StartCluster starts n redis-server processes in cluster mode as masters,
// splits the 16384 slots evenly between them, adds the replicas asked for,
// joins them all and waits until the cluster reports ok and every replica
// is online. Every process is stopped when tb ends.
func StartCluster(tb testing.TB, n int, opts ...ClusterOption) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("redistest: StartCluster(%d)", n)
	}
	c := &Cluster{nodeTimeout: 3 * time.Second}
	for _, o := range opts {
		o(c)
	}
	args := Args(
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(c.nodeTimeout.Milliseconds(), 10),
		// A replica is online (and listed in CLUSTER SLOTS, which
		// go-redis reads) once the master knows a non-zero
		// replication offset for it: after its first sync (which a master
		// delays 5 s by default) and a first write to the replication
		// stream, on an idle master the PING it sends its replicas every
		// repl-ping-replica-period (10 s by default).
		"--repl-diskless-sync-delay", "0",
		"--repl-ping-replica-period", "1",
	)
	sopts := append([]ServerOption{args}, c.server...)
	for range n {
		c.Servers = append(c.Servers, StartServer(tb, sopts...))
	}
	for i := range c.Replicas {
		c.Replicas[i] = StartServer(tb, sopts...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.form(ctx); err != nil {
		tb.Fatalf("redistest: forming a cluster of %d masters and %d replicas: %v", n, len(c.Replicas), err)
	}
	return c
}

func (c *Cluster) form(ctx context.Context) error {
	per := 16384 / len(c.Servers)
	for i, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr})
		lo, hi := i*per, (i+1)*per-1
		if i == len(c.Servers)-1 {
			hi = 16383
		}
		err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
		if err == nil && i > 0 {
			host, port, _ := strings.Cut(c.Servers[0].Addr, ":")
			p, _ := strconv.Atoi(port)
			err = cl.ClusterMeet(ctx, host, strconv.Itoa(p)).Err()
		}
		_ = cl.Close()
		if err != nil {
			return err
		}
	}
	host, port, _ := strings.Cut(c.Servers[0].Addr, ":")
	for i, r := range c.Replicas {
		master := c.Servers[i%len(c.Servers)]
		if err := replicate(ctx, r, master, host, port); err != nil {
			return fmt.Errorf("replica %s of %s: %w", r.Addr, master.Addr, err)
		}
	}
	total := len(c.Servers) + len(c.Replicas)
	for _, s := range c.Nodes() {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr})
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", total)) {
				if len(c.Replicas) == 0 {
					break
				}
				// Every replica online (then CLUSTER SLOTS lists it too).
				shards, err := cl.ClusterShards(ctx).Result()
				online := 0
				for _, sh := range shards {
					for _, n := range sh.Nodes {
						if n.Role == "replica" && n.Health == "online" {
							online++
						}
					}
				}
				if err == nil && online >= len(c.Replicas) {
					break
				}
			}
			select {
			case <-ctx.Done():
				_ = cl.Close()
				return fmt.Errorf("cluster not ok on %s: %v %s", s.Addr, err, info)
			case <-time.After(50 * time.Millisecond):
			}
		}
		_ = cl.Close()
	}
	return nil
}

// replicate makes r a replica of master: it meets the cluster (at host:port)
// and, once it knows the master, replicates it.
func replicate(ctx context.Context, r, master *Server, host, port string) error {
	mc := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer mc.Close()
	id, err := mc.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return err
	}
	rc := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rc.Close()
	p, _ := strconv.Atoi(port)
	if err := rc.ClusterMeet(ctx, host, strconv.Itoa(p)).Err(); err != nil {
		return err
	}
	for {
		// Fails until gossip has told r about the master.
		err := rc.Do(ctx, "CLUSTER", "REPLICATE", id).Err()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CLUSTER REPLICATE: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addrs lists the nodes' addresses.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		a[i] = s.Addr
	}
	return a
}

// UniversalClient is NewClient as a redis.UniversalClient (see [Topology]).
func (c *Cluster) UniversalClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	return c.NewClient(tb)
}

// Nodes lists every process of the cluster: the masters, then the
// replicas (see [Topology]).
func (c *Cluster) Nodes() []*Server {
	return append(append([]*Server(nil), c.Servers...), c.Replicas...)
}

// NewClient returns a cluster client, closed when tb ends.
func (c *Cluster) NewClient(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	tb.Cleanup(func() { _ = cl.Close() })
	return cl
}
