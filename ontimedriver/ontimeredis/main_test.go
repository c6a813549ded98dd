package ontimeredis_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

func TestMain(m *testing.M) {
	redis.SetLogger(sentinelQuiet{})
	// go-redis redials a dead node's pool (the failover tests kill one)
	// from a goroutine that sleeps a second between attempts and ends
	// after it, even once the client is closed.
	redistest.Main(m, redistest.CheckLeaks(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")))
}

// sentinelQuiet is go-redis's logger without the two lines its failover
// client writes each time one is made (every driver of the Sentinel tests)
// and the failed dials of a node the failover tests killed.
type sentinelQuiet struct{}

func (sentinelQuiet) Printf(_ context.Context, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.HasPrefix(msg, "sentinel: selected addr") || strings.HasPrefix(msg, "sentinel: new master") ||
		strings.Contains(msg, "connection pool: failed to dial") {
		return
	}
	log.Print(msg)
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
