package ontimeredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestCallsEndAtTheirDeadline: with a client built as the README shows (no
// ContextTimeoutEnabled, go-redis's default read timeout and retries), every
// driver call against a hung Redis still ends with the context's error when
// the context's deadline passes. go-redis alone would wait for its read
// timeout, and retry.
func TestCallsEndAtTheirDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, layout := range []ontimeredis.Layout{ontimeredis.Native, ontimeredis.Compatible} {
		d, err := ontimeredis.New(rdb, &ontimeredis.Options{Layout: layout, Prefix: redistest.Prefix(t), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		if err := d.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The topic is registered (native) while Redis answers, so that the
		// hung calls below are the scripts themselves.
		if _, err := d.Schedule(t.Context(), "hang", []ontimedriver.NewTimer{{ID: "a", Delay: time.Hour}}, ontimedriver.Upsert); err != nil {
			t.Fatal(err)
		}
		srv.Pause()
		calls := map[string]func(ctx context.Context) error{
			"Schedule": func(ctx context.Context) error {
				_, err := d.Schedule(ctx, "hang", []ontimedriver.NewTimer{{ID: "b"}}, ontimedriver.Upsert)
				return err
			},
			"Claim": func(ctx context.Context) error {
				_, err := d.Claim(ctx, "hang", 10, time.Second)
				return err
			},
			"Settle": func(ctx context.Context) error {
				_, err := d.Settle(ctx, "hang", []ontimedriver.Settlement{{Lease: ontimedriver.Lease{ID: "a", Token: "1"}}})
				return err
			},
			"Extend": func(ctx context.Context) error {
				_, err := d.Extend(ctx, "hang", []ontimedriver.Lease{{ID: "a", Token: "1"}}, time.Second)
				return err
			},
			"Count": func(ctx context.Context) error {
				_, err := d.Count(ctx, "hang")
				return err
			},
			"Topics": func(ctx context.Context) error {
				_, err := d.Topics(ctx)
				return err
			},
			"Ping": d.Ping,
		}
		for name, call := range calls {
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			start := time.Now()
			err := call(ctx)
			took := time.Since(start)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s %s against a paused Redis: err %v after %v, want context.DeadlineExceeded", layout, name, err, took.Round(time.Millisecond))
			}
			// go-redis's own bound is its 5 s read timeout, then retries.
			if took > 3*time.Second {
				t.Errorf("%s %s returned %v after a 200ms deadline", layout, name, took.Round(time.Millisecond))
			}
		}
		srv.Resume()
	}
}
