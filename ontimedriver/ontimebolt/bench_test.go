package ontimebolt_test

import (
	"testing"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/drivertest"
)

// BenchmarkDriver runs the shared driver benchmarks (package drivertest)
// on a fresh file per benchmark, fsync on (the store has no switch to turn
// it off). The Redis driver runs the same ones; compare with
//
//	go test -run '^$' -bench Driver ./ontimedriver/ontimebolt/ ./ontimedriver/ontimeredis/
func BenchmarkDriver(b *testing.B) {
	drivertest.Bench(b, drivertest.Harness{
		New: func(t testing.TB) ontimedriver.Driver {
			d, _ := open(t, nil)
			return d
		},
	})
}
