package ontimeredis_test

import (
	"sync"
	"testing"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// everyTopicSharded shards every topic of the suites in 3, but those of
// their recurring-timer cases ("rec*"): the driver refuses recurring
// timers on a sharded topic (see the package documentation and
// TestShardedRecurring), so those cases run on unsharded topics of a
// driver whose other topics are sharded.
var everyTopicSharded = map[string]int{"*": 3, "rec*": 1}

// TestConformanceSharded runs the conformance suite on one Redis with
// every topic in three shards.
func TestConformanceSharded(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, harness(ontimeredis.Options{Shards: everyTopicSharded}, drivertest.Features{}))
}

// TestLibrarySharded runs the library suite on one Redis with every topic
// in three shards.
func TestLibrarySharded(t *testing.T) {
	t.Parallel()
	drivertest.RunLibrary(t, harness(ontimeredis.Options{Shards: everyTopicSharded}, drivertest.Features{}))
}

// TestConformanceClusterSharded runs the conformance suite on a Cluster of
// three masters with every topic in three shards: each topic uses every
// master.
func TestConformanceClusterSharded(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t, 3)
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
			return open(t, ontimeredis.Options{Prefix: redistest.Prefix(t), Logger: quiet, Shards: everyTopicSharded})
		},
		NewPeer: func(t testing.TB, d ontimedriver.Driver) ontimedriver.Driver {
			mu.Lock()
			o := made[d]
			mu.Unlock()
			return open(t, o)
		},
	})
}
