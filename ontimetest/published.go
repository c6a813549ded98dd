package ontimetest

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// NewClient returns a Client on a fresh embedded store (ontimebolt) in
// tb's temporary directory, closed when the test ends. cfg may be nil;
// its Logger defaults to none.
func NewClient(tb testing.TB, cfg *ontime.Config) *ontime.Client {
	tb.Helper()
	var c ontime.Config
	if cfg != nil {
		c = *cfg
	}
	if c.Logger == nil {
		c.Logger = quietLogger()
	}
	drv, err := ontimebolt.Open(filepath.Join(tb.TempDir(), "ontimetest.db"), &ontimebolt.Options{Logger: c.Logger})
	if err != nil {
		tb.Fatalf("ontimetest: open the embedded store: %v", err)
	}
	tb.Cleanup(func() { _ = drv.Close() })
	client, err := ontime.NewClient(drv, &c)
	if err != nil {
		tb.Fatalf("ontimetest: %v", err)
	}
	return client
}

// Published returns every timer of topic (scheduled or leased), in due
// order.
func Published(ctx context.Context, c *ontime.Client, topic string) ([]ontime.TimerInfo, error) {
	var out []ontime.TimerInfo
	opts := ontime.ListOptions{Limit: 1000}
	for {
		p, err := c.List(ctx, topic, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Timers...)
		if p.NextCursor == "" {
			return out, nil
		}
		opts.Cursor = p.NextCursor
	}
}

// Want describes a published timer. A zero field matches anything.
type Want struct {
	// ID is the timer's id.
	ID string
	// Body is the message, compared with the stored body as Publish
	// encodes it: a string as text, a []byte as is, anything else as
	// compact JSON (so a struct matches the struct that was published).
	Body any
	// Headers must each be among the timer's user headers, with these
	// values.
	Headers map[string]string
	// DueAfter and DueBefore bound the timer's due time, inclusive. The
	// stores keep due times to the millisecond, rounded up.
	DueAfter, DueBefore time.Time
}

// Match reports whether ti is a timer w describes; if not, why.
func (w Want) Match(ti ontime.TimerInfo) (ok bool, why string) {
	switch {
	case w.ID != "" && ti.ID != w.ID:
		return false, fmt.Sprintf("id %q, want %q", ti.ID, w.ID)
	case !w.DueAfter.IsZero() && ti.Due.Before(w.DueAfter):
		return false, fmt.Sprintf("due %s, before %s", ti.Due.Format(time.RFC3339Nano), w.DueAfter.Format(time.RFC3339Nano))
	case !w.DueBefore.IsZero() && ti.Due.After(w.DueBefore):
		return false, fmt.Sprintf("due %s, after %s", ti.Due.Format(time.RFC3339Nano), w.DueBefore.Format(time.RFC3339Nano))
	}
	for k, v := range w.Headers {
		if got, ok := ti.Headers[k]; !ok || got != v {
			return false, fmt.Sprintf("header %q is %q, want %q", k, got, v)
		}
	}
	if w.Body != nil {
		b, err := encodeBody(w.Body)
		if err != nil {
			return false, err.Error()
		}
		if !bytes.Equal(ti.Body, b) {
			return false, fmt.Sprintf("body %q, want %q", ti.Body, b)
		}
	}
	return true, ""
}

func (w Want) String() string {
	var parts []string
	if w.ID != "" {
		parts = append(parts, fmt.Sprintf("id %q", w.ID))
	}
	if w.Body != nil {
		parts = append(parts, fmt.Sprintf("body %v", w.Body))
	}
	if len(w.Headers) > 0 {
		parts = append(parts, fmt.Sprintf("headers %v", w.Headers))
	}
	if !w.DueAfter.IsZero() {
		parts = append(parts, "due at or after "+w.DueAfter.Format(time.RFC3339Nano))
	}
	if !w.DueBefore.IsZero() {
		parts = append(parts, "due at or before "+w.DueBefore.Format(time.RFC3339Nano))
	}
	if len(parts) == 0 {
		return "any timer"
	}
	return "a timer with " + strings.Join(parts, ", ")
}

// RequirePublished fails the test (tb.Fatalf) unless topic holds a timer
// (scheduled or leased) that want describes, and returns the first such
// timer, in due order. The failure lists what the topic holds.
func RequirePublished(tb testing.TB, c *ontime.Client, topic string, want Want) ontime.TimerInfo {
	tb.Helper()
	all, err := Published(tb.Context(), c, topic)
	if err != nil {
		tb.Fatalf("ontimetest: list topic %q: %v", topic, err)
		return ontime.TimerInfo{}
	}
	var why []string
	for _, ti := range all {
		ok, reason := want.Match(ti)
		if ok {
			return ti
		}
		if len(why) < 10 {
			why = append(why, fmt.Sprintf("%s: %s", ti.ID, reason))
		}
	}
	if len(all) == 0 {
		tb.Fatalf("ontimetest: topic %q holds no timer; want %s", topic, want)
	} else {
		tb.Fatalf("ontimetest: topic %q holds %d timers, none of them %s:\n\t%s", topic, len(all), want, strings.Join(why, "\n\t"))
	}
	return ontime.TimerInfo{}
}

// RequireNotPublished fails the test (tb.Fatalf) if topic holds a timer
// (scheduled or leased) that want describes.
func RequireNotPublished(tb testing.TB, c *ontime.Client, topic string, want Want) {
	tb.Helper()
	all, err := Published(tb.Context(), c, topic)
	if err != nil {
		tb.Fatalf("ontimetest: list topic %q: %v", topic, err)
		return
	}
	for _, ti := range all {
		if ok, _ := want.Match(ti); ok {
			tb.Fatalf("ontimetest: topic %q holds %s (id %q, due %s, headers %v, body %q); want none", topic, want, ti.ID, ti.Due.Format(time.RFC3339Nano), ti.Headers, ti.Body)
			return
		}
	}
}
