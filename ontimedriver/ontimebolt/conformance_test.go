package ontimebolt_test

import (
	"testing"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
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
