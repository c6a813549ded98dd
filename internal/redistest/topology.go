package redistest

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// Topology is a set of redis-server processes that a test talks to as one
// store: a single [Server], a [Cluster], or another arrangement of Servers
// (a Sentinel setup). Tests that run the same checks on several topologies
// take a Topology; a test that breaks the store picks a node from Nodes and
// stops, kills, pauses or restarts it.
type Topology interface {
	// UniversalClient returns a client of the whole topology, closed when
	// tb ends.
	UniversalClient(tb testing.TB) redis.UniversalClient
	// Nodes lists the processes of the topology.
	Nodes() []*Server
}

var (
	_ Topology = (*Server)(nil)
	_ Topology = (*Cluster)(nil)
	_ Topology = (*Sentinel)(nil)
)
