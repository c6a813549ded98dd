package ontimeredis_test

import (
	"testing"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// harness runs drivers of one layout; the peer is a second client on the
// same keys, as a second worker process would be.
func harness(o ontimeredis.Options, lacks drivertest.Features) drivertest.Harness {
	made := map[ontimedriver.Driver]ontimeredis.Options{}
	var mu = make(chan struct{}, 1)
	return drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			d := newDriver(t, o)
			mu <- struct{}{}
			made[d] = d.Options()
			<-mu
			return d
		},
		NewPeer: func(t testing.TB, d ontimedriver.Driver) ontimedriver.Driver {
			mu <- struct{}{}
			o := made[d]
			<-mu
			return newDriverOn(t, o)
		},
		Lacks: lacks,
	}
}

func TestConformanceNative(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, harness(ontimeredis.Options{}, drivertest.Features{}))
}

var compatLacks = drivertest.Features{
	NoAttempts:    true,
	NoLeasedState: true,
	NoOriginalDue: true,
	NoLastError:   true,
}

func TestConformanceCompatible(t *testing.T) {
	t.Parallel()
	lacks := compatLacks
	lacks.NoDeadLetters = true
	drivertest.Run(t, harness(ontimeredis.Options{Layout: ontimeredis.Compatible}, lacks))
}

func TestConformanceCompatibleDeadLetters(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, harness(ontimeredis.Options{Layout: ontimeredis.Compatible, CompatDeadLetters: true}, compatLacks))
}

// TestLibrary runs the library-level suite (Client and Workers) on Redis,
// in both layouts; the peer of a case is a second client, as a second
// worker process would have.
func TestLibraryNative(t *testing.T) {
	t.Parallel()
	drivertest.RunLibrary(t, harness(ontimeredis.Options{}, drivertest.Features{}))
}

func TestLibraryCompatible(t *testing.T) {
	t.Parallel()
	lacks := compatLacks
	lacks.NoDeadLetters = true
	drivertest.RunLibrary(t, harness(ontimeredis.Options{Layout: ontimeredis.Compatible}, lacks))
}

func TestLibraryCompatibleDeadLetters(t *testing.T) {
	t.Parallel()
	drivertest.RunLibrary(t, harness(ontimeredis.Options{Layout: ontimeredis.Compatible, CompatDeadLetters: true}, compatLacks))
}
