package ontimebolt_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(closeAfter{m})
}

// closeAfter runs the tests and then closes what the benchmarks share
// (the loaded stores), before goleak looks for goroutines left behind.
type closeAfter struct{ m *testing.M }

func (c closeAfter) Run() int {
	code := c.m.Run()
	closeLoaded()
	return code
}

var quiet = slog.New(slog.DiscardHandler)

// unstorableID is an id longer than bbolt's key limit: bbolt refuses it in
// the middle of a transaction, which is how the tests make a call fail
// there (the driver assumes valid ids, which are at most 200 bytes).
var unstorableID = strings.Repeat("k", bbolt.MaxKeySize)

// open opens a fresh store in the test's own directory and closes it at
// cleanup. It returns the file's path too.
func open(t testing.TB, opts *ontimebolt.Options) (*ontimebolt.Driver, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ontime.db")
	return reopen(t, path, opts), path
}

// reopen opens path and closes the driver at cleanup.
func reopen(t testing.TB, path string, opts *ontimebolt.Options) *ontimebolt.Driver {
	t.Helper()
	if opts == nil {
		opts = &ontimebolt.Options{}
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	d, err := ontimebolt.Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func schedule(t testing.TB, d ontimedriver.Driver, topic string, timers ...ontimedriver.NewTimer) []ontimedriver.ScheduleResult {
	t.Helper()
	res, err := d.Schedule(context.Background(), topic, timers, ontimedriver.Upsert)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("Schedule %s: %v", timers[i].ID, r.Err)
		}
	}
	return res
}

func claim(t testing.TB, d ontimedriver.Driver, topic string, max int, lease time.Duration) *ontimedriver.ClaimResult {
	t.Helper()
	res, err := d.Claim(context.Background(), topic, max, lease)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return res
}

func settle(t testing.TB, d ontimedriver.Driver, topic string, ops ...ontimedriver.Settlement) []error {
	t.Helper()
	res, err := d.Settle(context.Background(), topic, ops)
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	return res
}

func ids(timers []ontimedriver.ClaimedTimer) []string {
	out := make([]string, len(timers))
	for i, ct := range timers {
		out[i] = ct.ID
	}
	return out
}
