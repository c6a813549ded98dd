package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver"
)

// cancelCounter counts the store's CancelBatch calls.
type cancelCounter struct {
	ontimedriver.Driver
	calls atomic.Int64
}

func (c *cancelCounter) Unwrap() ontimedriver.Driver { return c.Driver }

func (c *cancelCounter) CancelBatch(ctx context.Context, topic string, ids []string) ([]error, error) {
	c.calls.Add(1)
	return c.Driver.CancelBatch(ctx, topic, ids)
}

// TestCancelTimers: POST timers:cancel deletes the listed timers in one
// store call and answers each id (204 deleted, 404 none, also for an id
// listed twice); a missing, empty or too long list, an invalid id or an
// unknown field is refused and deletes nothing.
func TestCancelTimers(t *testing.T) {
	t.Parallel()
	var counter *cancelCounter
	e := newEnv(t, envOpts{wrap: func(d ontimedriver.Driver) ontimedriver.Driver {
		counter = &cancelCounter{Driver: d}
		return counter
	}})
	ctx := t.Context()
	var timers []ontime.Timer
	for i := range 5 {
		timers = append(timers, ontime.Timer{ID: fmt.Sprintf("c%d", i), Delay: time.Hour})
	}
	if _, err := e.client.PublishBatch(ctx, "t", timers); err != nil {
		t.Fatal(err)
	}

	many := make([]string, server.MaxCancel+1)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("x%d", i))
	}
	for _, c := range []struct{ body, code string }{
		{``, "missing_ids"},
		{`{}`, "missing_ids"},
		{`{"ids":[]}`, "missing_ids"},
		{`{"ids":null}`, "missing_ids"},
		{`{"all":true}`, "unknown_field"},
		{`{"ids":["c0"],"ids":["c1"]}`, "duplicate_field"},
		{`{"ids":"c0"}`, "invalid_field"},
		{`{"ids":["c0",".."]}`, "invalid_id"},
		{`{"ids":["c0",""]}`, "invalid_id"},
		{`{"ids":[` + strings.Join(many, ",") + `]}`, "too_many_ids"},
	} {
		r := e.do("POST", "/v1/topics/t/timers:cancel", c.body)
		e.want(r, 400, c.code)
	}
	if n := counter.calls.Load(); n != 0 {
		t.Fatalf("refused requests made %d store calls", n)
	}
	if n, err := e.client.Count(ctx, "t"); err != nil || n.Scheduled != 5 {
		t.Fatalf("after refused requests: %+v, %v; want 5 scheduled", n, err)
	}

	r := e.do("POST", "/v1/topics/t/timers:cancel", `{"ids":["c0","c3","nope","c3","c4"]}`)
	e.want(r, 200, "")
	var cr wire.CancelResult
	r.json(t, &cr)
	want := []int{204, 204, 404, 404, 204}
	if cr.Cancelled != 3 || len(cr.Results) != len(want) {
		t.Fatalf("answer %s, want 3 cancelled of 5", r.body)
	}
	for i, it := range cr.Results {
		if it.Status != want[i] || (it.Status == 404) != (it.Error != nil && it.Error.Code == "not_found") {
			t.Errorf("result %d: %+v, want %d", i, it, want[i])
		}
	}
	if cr.Results[2].ID != "nope" {
		t.Errorf("result 2 is for %q, want nope", cr.Results[2].ID)
	}
	if n := counter.calls.Load(); n != 1 {
		t.Errorf("%d store calls, want 1", n)
	}
	for id, kept := range map[string]bool{"c0": false, "c1": true, "c2": true, "c3": false, "c4": false} {
		_, err := e.client.Get(ctx, "t", id)
		if (err == nil) != kept {
			t.Errorf("%s: Get = %v, want kept %v", id, err, kept)
		}
	}
	// As many ids as allowed: one store call still.
	all := make([]string, server.MaxCancel)
	for i := range all {
		all[i] = fmt.Sprintf("%q", fmt.Sprintf("c%d", i))
	}
	r = e.do("POST", "/v1/topics/t/timers:cancel", `{"ids":[`+strings.Join(all, ",")+`]}`)
	e.want(r, 200, "")
	r.json(t, &cr)
	if cr.Cancelled != 2 || len(cr.Results) != server.MaxCancel {
		t.Errorf("%d cancelled of %d results, want 2 of %d", cr.Cancelled, len(cr.Results), server.MaxCancel)
	}
	if n := counter.calls.Load(); n != 2 {
		t.Errorf("%d store calls after two cancels, want 2", n)
	}
	e.want(e.do("GET", "/v1/topics/t/timers:cancel", nil), 405, "method_not_allowed")
}
