package ontimeredis_test

import (
	"log/slog"
	"testing"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

func TestMain(m *testing.M) {
	redistest.Main(m, redistest.CheckLeaks())
}

var quiet = slog.New(slog.DiscardHandler)

// newDriver returns a driver on the shared test server under a fresh prefix
// (native) or fresh key bases (compatible), closed at cleanup.
func newDriver(t testing.TB, o ontimeredis.Options) *ontimeredis.Driver {
	t.Helper()
	p := redistest.Prefix(t)
	if o.Prefix == "" {
		o.Prefix = p
	}
	if o.Layout == ontimeredis.Compatible && o.TimelineBase == "" {
		o.TimelineBase = p + "timers_timeline"
		o.PayloadsBase = p + "timers_payloads"
		o.DeadBase = p + "timers_dead"
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	return newDriverOn(t, o)
}

// newDriverOn returns a driver with exactly these options, on its own client.
func newDriverOn(t testing.TB, o ontimeredis.Options) *ontimeredis.Driver {
	t.Helper()
	d, err := ontimeredis.New(redistest.NewClient(t), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}
