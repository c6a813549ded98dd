package ontimebolt_test

import (
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// TestConformance runs the suite every driver passes. Each case gets a file
// of its own; the peer (a second worker) is the same Driver, as the store
// has one process by design.
func TestConformance(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			d, _ := open(t, nil)
			return d
		},
	})
}

// TestLibrary runs the library-level suite (Client and Workers on this
// store).
func TestLibrary(t *testing.T) {
	t.Parallel()
	drivertest.RunLibrary(t, drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			d, _ := open(t, nil)
			return d
		},
	})
}

// TestConformanceShortHorizon runs the suite with the claim index's near
// mark 100 ms ahead of the clock (the default is 2 minutes), so that most
// of its timers are written to the far bucket and moved to the near one
// by the promoter while the cases claim, list and count them.
func TestConformanceShortHorizon(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			o := &ontimebolt.Options{}
			ontimebolt.SetNearHorizon(o, 100*time.Millisecond)
			d, _ := open(t, o)
			return d
		},
	})
}
