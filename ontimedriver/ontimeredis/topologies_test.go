package ontimeredis_test

import (
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// topologyHarness runs drivers on clients of a topology (a Cluster, a
// Sentinel setup), each on its own client; the peer of a driver is a second
// client with the same options, as a second worker process would be.
func topologyHarness(client func(testing.TB) redis.UniversalClient, base ontimeredis.Options) drivertest.Harness {
	var mu sync.Mutex
	made := map[ontimedriver.Driver]ontimeredis.Options{}
	open := func(t testing.TB, o ontimeredis.Options) *ontimeredis.Driver {
		d, err := ontimeredis.New(client(t), &o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		mu.Lock()
		made[d] = d.Options()
		mu.Unlock()
		return d
	}
	return drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			o := base
			o.Prefix, o.Logger = redistest.Prefix(t), quiet
			return open(t, o)
		},
		NewPeer: func(t testing.TB, d ontimedriver.Driver) ontimedriver.Driver {
			mu.Lock()
			o := made[d]
			mu.Unlock()
			return open(t, o)
		},
	}
}

// TestSentinel runs the conformance and library suites on a Sentinel setup
// (a primary, a replica, three sentinels), through go-redis's failover
// client, as `ontime serve --redis redis+sentinel://...` connects.
func TestSentinel(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t)
	h := topologyHarness(func(tb testing.TB) redis.UniversalClient { return s.NewClient(tb) }, ontimeredis.Options{})
	t.Run("Conformance", func(t *testing.T) {
		t.Parallel()
		drivertest.Run(t, h)
	})
	t.Run("Library", func(t *testing.T) {
		t.Parallel()
		drivertest.RunLibrary(t, h)
	})
}
