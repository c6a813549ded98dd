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

// Cluster is a Redis Cluster of masters (no replicas) owned by a test.
type Cluster struct {
	Servers []*Server
}

// StartCluster starts n redis-server processes in cluster mode, splits the
// 16384 slots evenly between them, joins them and waits until the cluster
// reports ok. Every process is stopped when tb ends.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("redistest: StartCluster(%d)", n)
	}
	c := &Cluster{}
	for range n {
		c.Servers = append(c.Servers, StartServer(tb, Args(
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "3000",
		)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.form(ctx); err != nil {
		tb.Fatalf("redistest: forming a cluster of %d: %v", n, err)
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
	for _, s := range c.Servers {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr})
		for {
			info, err := cl.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.Servers))) {
				break
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

// Addrs lists the nodes' addresses.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		a[i] = s.Addr
	}
	return a
}

// NewClient returns a cluster client, closed when tb ends.
func (c *Cluster) NewClient(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	tb.Cleanup(func() { _ = cl.Close() })
	return cl
}
