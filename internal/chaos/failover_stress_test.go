//go:build linux && stress

package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
)

// The failover runs of failover_test.go that only the stress run makes.

// TestFailoverClusterAsync: a Cluster of 3 masters + 3 replicas, publishes
// acknowledged by the master alone: lost may be above 0, but only for
// publishes acknowledged in the dead master's last moments.
func TestFailoverClusterAsync(t *testing.T) {
	runFailover(t, failoverDefaults, false, clusterTopology(t))
}

// TestFailoverSentinelAsync: Sentinel, the primary killed, publishes
// acknowledged by the primary alone.
func TestFailoverSentinelAsync(t *testing.T) {
	runFailover(t, failoverDefaults, false, sentinelTopology(t))
}

// TestFailoverSentinelWaitReplicas: Sentinel, the primary killed,
// publishes with WaitReplicas(1, ...): lost must be 0.
func TestFailoverSentinelWaitReplicas(t *testing.T) {
	runFailover(t, failoverDefaults, true, sentinelTopology(t))
}

// sentinelTopology starts a Sentinel setup: 1 primary, 1 replica, 3
// sentinels (down-after 2 s, like the Cluster's node timeout; AOF with
// fsync on every write). The primary, killed, holds every shard.
func sentinelTopology(t *testing.T) failoverTopology {
	s := redistest.StartSentinel(t, redistest.DownAfter(2*time.Second), redistest.DataServerOptions(redistest.AppendOnly()))
	primaryIs := func(ctx context.Context, addr string) bool {
		for _, sn := range s.Sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr})
			a, err := c.GetMasterAddrByName(ctx, redistest.MasterName).Result()
			_ = c.Close()
			if err != nil || len(a) != 2 || a[0]+":"+a[1] != addr {
				return false
			}
		}
		return true
	}
	return failoverTopology{
		name:    "Sentinel 1 primary + 1 replica + 3 sentinels",
		client:  func(tb testing.TB) redis.UniversalClient { return s.NewClient(tb) },
		masters: []*redistest.Server{s.Primary},
		victim:  s.Primary, heir: s.Replicas[0],
		// Every sentinel announces the promoted replica. A primary
		// restarted before that comes back as a primary, and a client
		// still on its address writes to it until the sentinels make it a
		// replica, which drops those writes: a first version of this test
		// restarted it as soon as the replica was promoted and lost 606
		// timers acknowledged by the restarted primary.
		announced: func(ctx context.Context) bool { return primaryIs(ctx, s.Replicas[0].Addr) },
		// And it is made a replica at once, as the sentinels would do only
		// 8 s later (4 × their publish period): in two runs of fifteen
		// that left it a primary, it ended as the primary and the promoted
		// replica as its replica, losing what that one had acknowledged
		// (docs/guarantees.md).
		rejoin: func(ctx context.Context) error {
			host, port, _ := strings.Cut(s.Replicas[0].Addr, ":")
			return s.Primary.NewClient(t).ReplicaOf(ctx, host, port).Err()
		},
		logs: func() string {
			var b strings.Builder
			for _, n := range s.Nodes() {
				fmt.Fprintf(&b, "== %s\n%s", n.Addr, n.Log())
			}
			return b.String()
		},
	}
}
