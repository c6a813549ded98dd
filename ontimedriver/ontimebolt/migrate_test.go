package ontimebolt_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// The fixture in testdata/v1 is a store written by the first layout
// (format "ontimebolt/1", one bucket per topic), and what that layout's own
// code read back from it after a reopen; testdata/v1/gen.go made both.

type v1Topic struct {
	Counts ontimedriver.Counts
	Timers []ontimedriver.TimerInfo
	Dead   []ontimedriver.DeadLetter
}

type v1Want struct {
	Topics []string
	Want   map[string]v1Topic
}

// v1Store writes the fixture to a fresh file and returns its path and what
// it holds.
func v1Store(t *testing.T) (string, v1Want) {
	t.Helper()
	f, err := os.Open("testdata/v1/store.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v1.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/v1/want.json")
	if err != nil {
		t.Fatal(err)
	}
	var want v1Want
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// checkV1Content compares what d holds with what the first layout read.
func checkV1Content(t *testing.T, d *ontimebolt.Driver, want v1Want) {
	t.Helper()
	topics, err := d.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(topics, want.Topics) {
		t.Errorf("Topics = %q\nwant %q", topics, want.Topics)
	}
	for topic, w := range want.Want {
		var got v1Topic
		if got.Counts, err = d.Count(ctx, topic); err != nil {
			t.Fatal(err)
		}
		page, err := d.List(ctx, topic, ontimedriver.ListOptions{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got.Timers = page.Timers
		dead, err := d.ListDead(ctx, topic, ontimedriver.ListOptions{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got.Dead = dead.Dead
		// Compare as JSON, as want was written (time zones, nil slices).
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(w)
		if !bytes.Equal(gj, wj) {
			t.Errorf("topic %q:\n got %s\nwant %s", topic, gj, wj)
		}
	}
}

// TestOpenV1Store: a store written by the first layout opens, is migrated
// in place, holds what it held (the leases it held dropped, as every Open
// does), checks out whole, and works: its timers are claimed, fenced and
// acked, its dead letters replayed.
func TestOpenV1Store(t *testing.T) {
	t.Parallel()
	path, want := v1Store(t)
	d := reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
	if f := ontimebolt.Format(t, d); f != "ontimebolt/2" {
		t.Fatalf("format after open = %q", f)
	}
	checkV1Content(t, d, want)

	// The claim order is the first layout's: order-07 and order-08 (leased
	// in the file, their leases dropped), then the other due ones.
	r := claim(t, d, "orders", 3, time.Hour)
	if got := ids(r.Timers); !reflect.DeepEqual(got, []string{"order-07", "order-08", "order-09"}) {
		t.Fatalf("claimed %v", got)
	}
	if r.Timers[0].Attempt != 2 {
		t.Errorf("order-07 attempt %d, want 2 (its dropped claim counted)", r.Timers[0].Attempt)
	}
	errs := settle(t, d, "orders",
		ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "order-07", Token: r.Timers[0].Token}, Kind: ontimedriver.Ack},
		ontimedriver.Settlement{Lease: ontimedriver.Lease{ID: "order-08", Token: r.Timers[0].Token}, Kind: ontimedriver.Ack})
	if errs[0] != nil || !errors.Is(errs[1], ontimedriver.ErrLeaseLost) {
		t.Errorf("settle = %v, want nil and ErrLeaseLost (another timer's token)", errs)
	}
	if n, err := d.ReplayDead(ctx, "dead-only", []string{"x"}); n != 1 || err != nil {
		t.Errorf("ReplayDead = %d, %v", n, err)
	}
	if err := d.Cancel(ctx, "tenant.29/a_b-c:d@e+f~g", "t-29"); err != nil {
		t.Error(err)
	}
	topics, _ := d.Topics(ctx)
	if len(topics) != len(want.Topics)-1 {
		t.Errorf("%d topics after emptying one, want %d", len(topics), len(want.Topics)-1)
	}

	// Reopened, it is format 2 as it is and still whole.
	_ = d.Close()
	d = reopen(t, path, &ontimebolt.Options{CheckOnOpen: true})
	if c, _ := d.Count(ctx, "orders"); c.Scheduled != want.Want["orders"].Counts.Scheduled-1 {
		t.Errorf("orders after reopen: %+v", c)
	}
}

// TestMigrationResumes stops the migration before each of its
// transactions in turn, as a crash there would, and opens the file again:
// the next Open finishes the migration and the store holds what it held.
// The file in the middle is refused by the first layout's code (its format
// marker is unknown there).
func TestMigrationResumes(t *testing.T) {
	t.Parallel()
	errStop := errors.New("stopped")
	var total int
	{
		path, want := v1Store(t)
		o := &ontimebolt.Options{Logger: quiet}
		ontimebolt.SetMigration(o, 7, func(txs int) error { total = txs + 1; return nil })
		d := reopen(t, path, o)
		checkV1Content(t, d, want)
	}
	if total < 10 {
		t.Fatalf("the migration took %d transactions; the test wants many", total)
	}
	for stop := 0; stop < total; stop++ {
		path, want := v1Store(t)
		o := &ontimebolt.Options{Logger: quiet}
		ontimebolt.SetMigration(o, 7, func(txs int) error {
			if txs == stop {
				return errStop
			}
			return nil
		})
		if _, err := ontimebolt.Open(path, o); !errors.Is(err, errStop) {
			t.Fatalf("stop before transaction %d: Open = %v", stop, err)
		}
		o = &ontimebolt.Options{Logger: quiet, CheckOnOpen: true}
		ontimebolt.SetMigration(o, 5, nil)
		d := reopen(t, path, o)
		checkV1Content(t, d, want)
		_ = d.Close()
	}
}
