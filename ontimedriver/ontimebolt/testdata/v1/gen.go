//go:build ignore

// gen writes store.db, a store in the first on-disk layout of ontimebolt
// ("ontimebolt/1": one bucket per topic, never deleted), and want.json,
// what that store holds as the layout's own code reads it back after a
// reopen (which drops the leases, as every Open does). TestOpenV1Store
// opens a copy of store.db with the current code and compares.
//
// It was run once, at commit cdf2293 (the last commit with the first
// layout), from this directory:
//
//	go run gen.go
//
// It uses the public API only, so run with a later tree it would write
// the later layout: check out cdf2293 to make the fixture again.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

var ctx = context.Background()

// base is an instant every due time is built from, so that the fixture
// does not depend on when it was made.
var base = time.Date(2030, 1, 2, 3, 4, 5, 678_901_000, time.UTC)

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func schedule(d *ontimebolt.Driver, topic string, timers ...ontimedriver.NewTimer) {
	res, err := d.Schedule(ctx, topic, timers, ontimedriver.Upsert)
	must(err)
	for _, r := range res {
		must(r.Err)
	}
}

// Topic is one topic as want.json holds it.
type Topic struct {
	Counts ontimedriver.Counts
	Timers []ontimedriver.TimerInfo
	Dead   []ontimedriver.DeadLetter
}

func main() {
	quiet := slog.New(slog.DiscardHandler)
	tmp, err := os.MkdirTemp("", "ontimebolt-v1-")
	must(err)
	defer os.RemoveAll(tmp)
	path := filepath.Join(tmp, "store.db")
	d, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet})
	must(err)

	// "orders": 40 timers, due in the past (claimable) and in the future.
	var timers []ontimedriver.NewTimer
	for i := range 40 {
		at := base.Add(time.Duration(i-20) * time.Minute)
		if i < 20 {
			at = time.Unix(1_600_000_000+int64(i), int64(i)*1000).UTC() // 2020: due
		}
		timers = append(timers, ontimedriver.NewTimer{
			ID: fmt.Sprintf("order-%02d", i), At: at,
			Payload: []byte(fmt.Sprintf("payload of order %d: %s", i, string(make([]byte, i%7)))),
		})
	}
	schedule(d, "orders", timers...)
	// Claim 8 of the due ones: 2 acked, 2 retried with an error, 2 dead,
	// 1 snoozed, 1 left leased (its lease is in the file when it is closed).
	r, err := d.Claim(ctx, "orders", 8, time.Hour)
	must(err)
	if len(r.Timers) != 8 {
		log.Fatalf("claimed %d", len(r.Timers))
	}
	lease := func(i int) ontimedriver.Lease {
		return ontimedriver.Lease{ID: r.Timers[i].ID, Token: r.Timers[i].Token}
	}
	errs, err := d.Settle(ctx, "orders", []ontimedriver.Settlement{
		{Lease: lease(0), Kind: ontimedriver.Ack},
		{Lease: lease(1), Kind: ontimedriver.Ack},
		{Lease: lease(2), Kind: ontimedriver.Retry, Delay: 10 * 365 * 24 * time.Hour, Error: "boom: retried"},
		{Lease: lease(3), Kind: ontimedriver.Retry, Delay: 0, Error: "boom: retried at once"},
		{Lease: lease(4), Kind: ontimedriver.Dead, Reason: ontimedriver.ReasonRejected, Error: "rejected by the handler"},
		{Lease: lease(5), Kind: ontimedriver.Dead, Reason: ontimedriver.ReasonMaxAttempts},
		{Lease: lease(6), Kind: ontimedriver.Snooze, Delay: 24 * time.Hour},
	})
	must(err)
	for _, e := range errs {
		must(e)
	}
	// A second claim of one more: leased twice now is not possible, so
	// claim the retried-at-once one again (attempt 2), and leave it.
	_, err = d.Claim(ctx, "orders", 1, time.Hour)
	must(err)

	// "emptied": written and cancelled; its bucket stays in this layout.
	schedule(d, "emptied", ontimedriver.NewTimer{ID: "gone", At: base})
	must(d.Cancel(ctx, "emptied", "gone"))

	// "dead-only": one dead letter and nothing else.
	schedule(d, "dead-only", ontimedriver.NewTimer{ID: "x", At: time.Unix(1_600_000_000, 0), Payload: []byte("x")})
	r, err = d.Claim(ctx, "dead-only", 1, time.Minute)
	must(err)
	_, err = d.Settle(ctx, "dead-only", []ontimedriver.Settlement{{Lease: ontimedriver.Lease{ID: "x", Token: r.Timers[0].Token}, Kind: ontimedriver.Dead, Reason: "test", Error: "dead on arrival"}})
	must(err)

	// 30 tenants with one future timer each, names with every allowed
	// character class.
	for i := range 30 {
		schedule(d, fmt.Sprintf("tenant.%02d/a_b-c:d@e+f~g", i), ontimedriver.NewTimer{
			ID: fmt.Sprintf("t-%d", i), At: base.Add(time.Duration(i) * time.Second), Payload: []byte{byte(i), 0, 255},
		})
	}
	// A topic whose name is a prefix of another's, and ids with unicode.
	schedule(d, "tenant", ontimedriver.NewTimer{ID: "préfix ✓", At: base, Payload: []byte("p")})
	must(d.Close())

	// The fixture is the file as closed, leases and all.
	raw, err := os.ReadFile(path)
	must(err)
	must(os.WriteFile("store.db", raw, 0o644))

	// What the layout's code reads back after a reopen.
	d, err = ontimebolt.Open(path, &ontimebolt.Options{Logger: quiet, CheckOnOpen: true})
	must(err)
	defer d.Close()
	topics, err := d.Topics(ctx)
	must(err)
	want := map[string]Topic{}
	for _, topic := range append(topics, "emptied") {
		var tp Topic
		tp.Counts, err = d.Count(ctx, topic)
		must(err)
		page, err := d.List(ctx, topic, ontimedriver.ListOptions{Limit: 1000})
		must(err)
		tp.Timers = page.Timers
		dead, err := d.ListDead(ctx, topic, ontimedriver.ListOptions{Limit: 1000})
		must(err)
		tp.Dead = dead.Dead
		want[topic] = tp
	}
	out, err := json.MarshalIndent(struct {
		Topics []string
		Want   map[string]Topic
	}{topics, want}, "", "  ")
	must(err)
	must(os.WriteFile("want.json", append(out, '\n'), 0o644))
}
