package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
)

func isNotFound(err error) bool { return errors.Is(err, ontime.ErrNotFound) }

// lateBound is the lateness every delivery must stay within. It is generous:
// the suite runs with the race detector on a shared machine.
const lateBound = 2 * time.Second

// wantOnTime checks a delivery against the due time the store reported at
// publish: never before it on the store's clock, and not later than
// lateBound.
func wantOnTime[T any](l *lib, what string, s seen[T], due time.Time) {
	l.t.Helper()
	if s.StoreNow.Before(due) {
		l.t.Errorf("%s: delivered EARLY: store clock %s in the handler, due %s", what, ts(s.StoreNow), ts(due))
	}
	if s.Msg.Due.After(s.StoreNow) {
		l.t.Errorf("%s: Message.Due %s is after the store clock %s in the handler", what, ts(s.Msg.Due), ts(s.StoreNow))
	}
	if late := s.StoreNow.Sub(due); late > lateBound {
		l.t.Errorf("%s: delivered %v late (due %s, handler at %s)", what, late, ts(due), ts(s.StoreNow))
	}
}

type invoice struct {
	ID       int               `json:"id"`
	Customer string            `json:"customer"`
	Lines    []string          `json:"lines"`
	Meta     map[string]string `json:"meta,omitempty"`
}

func libDelivery(l *lib) {
	c := l.client(nil)
	texts := collect[string](l, nil)
	jsons := collect[invoice](l, nil)
	raws := collect[[]byte](l, nil)

	// Published before the worker starts, so Get can report each due time.
	textID := l.publish(c, "text", "hello, wörld", ontime.WithID("t-1"), ontime.WithHeader("k", "v"))
	inv := invoice{ID: 42, Customer: "ACME <&>", Lines: []string{"a", "b"}, Meta: map[string]string{"x": "y"}}
	jsonID := l.publish(c, "json", inv, ontime.WithCorrelationID("corr-7"), ontime.WithHeaders(map[string]string{"tenant": "t9", "trace": "abc"}))
	rawBody := []byte{0, 1, 2, 0xfe, 0xff}
	rawID := l.publish(c, "raw", rawBody, ontime.WithID("r-1"), ontime.WithHeaders(map[string]string{"a": "1", "b": "2"}))
	if textID != "t-1" || rawID != "r-1" {
		l.t.Fatalf("Publish returned ids %q and %q, want the ids given", textID, rawID)
	}
	dues := map[string]time.Time{}
	for _, p := range [][2]string{{"text", textID}, {"json", jsonID}, {"raw", rawID}} {
		ti, err := c.Get(l.ctx, p[0], p[1])
		if err != nil {
			l.t.Fatalf("Get(%s/%s): %v", p[0], p[1], err)
		}
		dues[p[1]] = ti.Due
	}

	l.start(c, nil, func(w *ontime.Worker) error {
		return errors.Join(
			ontime.Handle(w, "text", texts.handle, nil),
			ontime.Handle(w, "json", jsons.handle, nil),
			ontime.Handle(w, "raw", raws.handle, nil),
		)
	})
	texts.wait(1, waitTimeout, "the text message")
	jsons.wait(1, waitTimeout, "the JSON message")
	raws.wait(1, waitTimeout, "the raw message")
	for _, topic := range []string{"text", "json", "raw"} {
		l.waitEmpty(c, topic, waitTimeout)
	}

	tm := texts.all()
	if len(tm) != 1 {
		l.t.Fatalf("text: %d deliveries, want 1", len(tm))
	}
	if tm[0].Msg.Body != "hello, wörld" {
		l.t.Errorf("text: Body %q", tm[0].Msg.Body)
	}
	checkMessage(l, "text", &tm[0].Msg, dues, textID, "text", textID, "text/plain", map[string]string{"k": "v"}, []byte("hello, wörld"))
	wantOnTime(l, "text", tm[0], dues[textID])

	jm := jsons.all()
	if len(jm) != 1 {
		l.t.Fatalf("json: %d deliveries, want 1", len(jm))
	}
	if !reflect.DeepEqual(jm[0].Msg.Body, inv) {
		l.t.Errorf("json: Body %+v, want %+v", jm[0].Msg.Body, inv)
	}
	checkMessage(l, "json", &jm[0].Msg, dues, jsonID, "json", "corr-7", "application/json", map[string]string{"tenant": "t9", "trace": "abc"},
		[]byte(`{"id":42,"customer":"ACME <&>","lines":["a","b"],"meta":{"x":"y"}}`))

	rm := raws.all()
	if len(rm) != 1 {
		l.t.Fatalf("raw: %d deliveries, want 1", len(rm))
	}
	if !bytes.Equal(rm[0].Msg.Body, rawBody) {
		l.t.Errorf("raw: Body %q, want %q", rm[0].Msg.Body, rawBody)
	}
	checkMessage(l, "raw", &rm[0].Msg, dues, rawID, "raw", rawID, "", map[string]string{"a": "1", "b": "2"}, rawBody)
}

// checkMessage checks the fields of a first delivery.
func checkMessage[T any](l *lib, what string, m *ontime.Message[T], dues map[string]time.Time, id, topic, corr, ct string, headers map[string]string, raw []byte) {
	l.t.Helper()
	if m.ID != id || m.Topic != topic {
		l.t.Errorf("%s: ID/Topic %q/%q, want %q/%q", what, m.ID, m.Topic, id, topic)
	}
	if m.CorrelationID != corr {
		l.t.Errorf("%s: CorrelationID %q, want %q", what, m.CorrelationID, corr)
	}
	if m.ContentType != ct {
		l.t.Errorf("%s: ContentType %q, want %q", what, m.ContentType, ct)
	}
	if len(m.Headers) != len(headers) || (len(headers) > 0 && !maps.Equal(m.Headers, headers)) {
		l.t.Errorf("%s: Headers %v, want %v", what, m.Headers, headers)
	}
	if !bytes.Equal(m.Raw, raw) {
		l.t.Errorf("%s: Raw %q, want %q", what, m.Raw, raw)
	}
	if m.Attempt != 1 {
		l.t.Errorf("%s: Attempt %d, want 1", what, m.Attempt)
	}
	due := dues[id]
	if l.lacks.NoOriginalDue {
		if m.Due.Before(due) {
			l.t.Errorf("%s: Due %s before the published due %s", what, ts(m.Due), ts(due))
		}
	} else if !m.Due.Equal(due) {
		l.t.Errorf("%s: Due %s, want the published due %s", what, ts(m.Due), ts(due))
	}
	if !m.LeaseUntil.After(m.Due) {
		l.t.Errorf("%s: LeaseUntil %s not after Due %s", what, ts(m.LeaseUntil), ts(m.Due))
	}
}

func libNeverEarly(l *lib) {
	c := l.client(nil)
	col := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "early", col.handle, nil) })

	dues := map[string]time.Time{}
	for i, d := range []time.Duration{50, 120, 180, 250, 320, 400} {
		id, due := l.publishDue(c, "early", ontime.Timer{ID: fmt.Sprintf("d%d", i), Body: "x", Delay: d * time.Millisecond})
		dues[id] = due
	}
	// At instants, one in the past (fires at once), one ahead.
	now := l.now()
	pastID, pastDue := l.publishDue(c, "early", ontime.Timer{ID: "past", Body: "x", At: now.Add(-time.Hour)})
	dues[pastID] = pastDue
	if pastDue.After(now.Add(-time.Hour).Add(time.Millisecond)) {
		l.t.Errorf("past At: stored due %s, want the instant given (%s)", ts(pastDue), ts(now.Add(-time.Hour)))
	}
	at := now.Add(300 * time.Millisecond)
	atID, atDue := l.publishDue(c, "early", ontime.Timer{ID: "at", Body: "x", At: at})
	dues[atID] = atDue
	if atDue.Before(at) {
		l.t.Errorf("At: stored due %s before the instant given %s", ts(atDue), ts(at))
	}

	col.wait(len(dues), waitTimeout, "every timer")
	for _, s := range col.all() {
		due := dues[s.Msg.ID]
		if s.Msg.ID == "past" {
			due = now // late is measured from the publish
		}
		wantOnTime(l, s.Msg.ID, s, due)
		if !l.lacks.NoOriginalDue && !s.Msg.Due.Equal(dues[s.Msg.ID]) {
			l.t.Errorf("%s: Message.Due %s, want the published %s", s.Msg.ID, ts(s.Msg.Due), ts(dues[s.Msg.ID]))
		}
	}
	l.waitEmpty(c, "early", waitTimeout)
	if n := col.count(); n != len(dues) {
		l.t.Errorf("%d deliveries of %d timers", n, len(dues))
	}
}

func libCancel(l *lib) {
	c := l.client(nil)
	col := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "cancel", col.handle, nil) })

	id := l.publish(c, "cancel", "never", ontime.In(200*time.Millisecond))
	if err := c.Cancel(l.ctx, "cancel", id); err != nil {
		l.t.Fatalf("Cancel: %v", err)
	}
	l.wantAbsent(c, "cancel", id)
	if err := c.Cancel(l.ctx, "cancel", id); !isNotFound(err) {
		l.t.Errorf("second Cancel: %v, want ErrNotFound", err)
	}
	if err := c.Cancel(l.ctx, "cancel", "never-was"); !isNotFound(err) {
		l.t.Errorf("Cancel of an unknown id: %v, want ErrNotFound", err)
	}
	// A timer due now, cancelled before any worker could see it: publish
	// it on a topic nobody handles yet.
	controlPassed(l, c, col, "cancel", "control", 500*time.Millisecond)
	if n := col.countOf(id); n != 0 {
		l.t.Errorf("the cancelled timer was delivered %d times", n)
	}
}

func libReschedule(l *lib) {
	c := l.client(nil)
	col := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "resched", col.handle, nil) })

	l.publishDue(c, "resched", ontime.Timer{ID: "r", Body: "v1", Delay: 150 * time.Millisecond})
	_, due2 := l.publishDue(c, "resched", ontime.Timer{ID: "r", Body: "v2", Delay: 500 * time.Millisecond})
	// Moving it earlier works too.
	l.publishDue(c, "resched", ontime.Timer{ID: "e", Body: "late", Delay: time.Hour})
	_, dueE := l.publishDue(c, "resched", ontime.Timer{ID: "e", Body: "early", Delay: 100 * time.Millisecond})

	col.waitOf("r", 1, waitTimeout, "the rescheduled timer")
	col.waitOf("e", 1, waitTimeout, "the timer moved earlier")
	controlPassed(l, c, col, "resched", "control", 300*time.Millisecond)
	rs := col.of("r")
	if len(rs) != 1 {
		l.t.Fatalf("rescheduled timer delivered %d times, want once", len(rs))
	}
	if rs[0].Msg.Body != "v2" {
		l.t.Errorf("rescheduled timer delivered with body %q, want the new one", rs[0].Msg.Body)
	}
	wantOnTime(l, "rescheduled timer", rs[0], due2)
	es := col.of("e")
	if len(es) != 1 || es[0].Msg.Body != "early" {
		l.t.Errorf("timer moved earlier: %d deliveries", len(es))
	} else {
		wantOnTime(l, "timer moved earlier", es[0], dueE)
	}
}

func libIfAbsent(l *lib) {
	c := l.client(nil)
	l.publish(c, "ifabsent", "orig", ontime.WithID("a"), ontime.In(time.Hour))
	id, err := c.Publish(l.ctx, "ifabsent", "new", ontime.WithID("a"), ontime.IfAbsent(), ontime.In(time.Minute))
	if !errors.Is(err, ontime.ErrExists) {
		l.t.Fatalf("Publish IfAbsent over an existing id: id %q, err %v; want ErrExists", id, err)
	}
	ti, err := c.Get(l.ctx, "ifabsent", "a")
	if err != nil {
		l.t.Fatalf("Get: %v", err)
	}
	if string(ti.Body) != "orig" {
		l.t.Errorf("after a refused IfAbsent: body %q, want the original", ti.Body)
	}
	if ti.Due.Before(l.now().Add(50 * time.Minute)) {
		l.t.Errorf("after a refused IfAbsent: due %s moved", ts(ti.Due))
	}
	// An absent id is written.
	if _, err := c.Publish(l.ctx, "ifabsent", "fresh", ontime.WithID("b"), ontime.IfAbsent()); err != nil {
		l.t.Errorf("Publish IfAbsent of a new id: %v", err)
	}
	// Batch form: per-timer results.
	res, err := c.PublishBatch(l.ctx, "ifabsent", []ontime.Timer{{ID: "a", Body: "x"}, {ID: "c", Body: "y"}}, ontime.BatchIfAbsent())
	if err != nil {
		l.t.Fatalf("PublishBatch IfAbsent: %v", err)
	}
	if !errors.Is(res[0].Err, ontime.ErrExists) || res[1].Err != nil {
		l.t.Errorf("PublishBatch IfAbsent results: %v, %v; want ErrExists, nil", res[0].Err, res[1].Err)
	}
	if ti, err := c.Get(l.ctx, "ifabsent", "a"); err != nil || string(ti.Body) != "orig" {
		l.t.Errorf("after a refused batch IfAbsent: %v, %v", ti, err)
	}
}

func libConcurrency(l *lib) {
	c := l.client(nil)
	var inflight, peak atomic.Int32
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], _ int) error {
		n := inflight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(80 * time.Millisecond)
		inflight.Add(-1)
		return nil
	})
	timers := make([]ontime.Timer, 20)
	for i := range timers {
		timers[i] = ontime.Timer{ID: fmt.Sprintf("c%02d", i), Body: "slow"}
	}
	if _, err := c.PublishBatch(l.ctx, "conc", timers); err != nil {
		l.t.Fatalf("PublishBatch: %v", err)
	}
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "conc", col.handle, &ontime.TopicOptions{MaxConcurrency: 3})
	})
	col.wait(20, 10*time.Second, "20 slow timers")
	l.waitEmpty(c, "conc", waitTimeout)
	if p := peak.Load(); p != 3 {
		l.t.Errorf("peak concurrency %d, want exactly MaxConcurrency 3", p)
	}
	if n := col.count(); n != 20 {
		l.t.Errorf("%d deliveries, want 20", n)
	}
}

func libTwoWorkers(l *lib) {
	const total = 200
	c1 := l.client(nil)
	c2 := l.peerClient()
	var mu = make(chan struct{}, 1)
	byWorker := [2]map[string]int{{}, {}}
	handler := func(w int) ontime.HandlerFunc[string] {
		return func(ctx context.Context, m *ontime.Message[string]) error {
			mu <- struct{}{}
			byWorker[w][m.ID]++
			<-mu
			time.Sleep(time.Millisecond)
			return nil
		}
	}
	opts := &ontime.TopicOptions{MaxConcurrency: 8}
	l.start(c1, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "pair", handler(0), opts) })
	l.start(c2, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "pair", handler(1), opts) })
	timers := make([]ontime.Timer, total)
	for i := range timers {
		timers[i] = ontime.Timer{ID: fmt.Sprintf("p%03d", i), Body: "x"}
	}
	if _, err := c1.PublishBatch(l.ctx, "pair", timers); err != nil {
		l.t.Fatalf("PublishBatch: %v", err)
	}
	l.waitEmpty(c1, "pair", 15*time.Second)
	mu <- struct{}{}
	defer func() { <-mu }()
	for i := range timers {
		id := timers[i].ID
		if n := byWorker[0][id] + byWorker[1][id]; n != 1 {
			l.t.Errorf("%s delivered %d times (worker 1: %d, worker 2: %d), want exactly once", id, n, byWorker[0][id], byWorker[1][id])
		}
	}
	l.t.Logf("worker 1 handled %d, worker 2 handled %d", len(byWorker[0]), len(byWorker[1]))
}

func libRetry(l *lib) {
	c := l.client(nil)
	const minDelay = 250 * time.Millisecond
	failed := make(chan struct{})
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if nth == 0 {
			defer close(failed)
			return errors.New("boom")
		}
		return nil
	})
	col.readEnd = true
	l.publish(c, "retry", "x", ontime.WithID("r"))
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "retry", col.handle, &ontime.TopicOptions{
			Retry: ontime.RetryPolicy{MinDelay: minDelay, MaxDelay: time.Second, Jitter: -1, MaxAttempts: 5},
		})
	})
	<-failed
	// Between the attempts the store keeps the failure.
	var between *ontime.TimerInfo
	WaitFor(l.t, waitTimeout, func() bool {
		ti, err := c.Get(l.ctx, "retry", "r")
		if err != nil || col.countOf("r") > 1 {
			return true
		}
		if ti.State == ontime.StateScheduled && ti.LeaseUntil.IsZero() {
			between = ti
			return true
		}
		return false
	}, "the failed timer to be scheduled again")
	if between == nil {
		l.t.Log("not checked: the retry ran before Get could see the timer between attempts")
	} else {
		if !l.lacks.NoAttempts && between.Attempt != 1 {
			l.t.Errorf("between attempts: Attempt %d, want 1", between.Attempt)
		}
		if !l.lacks.NoLastError && !strings.Contains(between.LastError, "boom") {
			l.t.Errorf("between attempts: LastError %q, want the handler's error", between.LastError)
		}
	}
	col.waitOf("r", 2, waitTimeout, "the retry")
	l.waitAbsent(c, "retry", "r")
	rs := col.of("r")
	if len(rs) != 2 {
		l.t.Fatalf("%d deliveries, want 2", len(rs))
	}
	if gap := rs[1].StoreNow.Sub(rs[0].End); gap < minDelay {
		l.t.Errorf("retried %v after the failure, want at least the policy's MinDelay %v", gap, minDelay)
	}
	want := 2
	if l.lacks.NoAttempts {
		want = 1
	}
	if rs[1].Msg.Attempt != want {
		l.t.Errorf("retry delivered with Attempt %d, want %d", rs[1].Msg.Attempt, want)
	}
	if rs[1].Msg.Due.Before(rs[0].End.Add(minDelay)) && !l.lacks.NoOriginalDue {
		l.t.Errorf("retry Due %s, want at least the failure + MinDelay %s", ts(rs[1].Msg.Due), ts(rs[0].End.Add(minDelay)))
	}

	// RetryAfter overrides the backoff and counts the attempt.
	col2 := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if nth == 0 {
			return ontime.RetryAfter(100*time.Millisecond, errors.New("later"))
		}
		return nil
	})
	col2.readEnd = true
	l.publish(c, "retry-after", "x", ontime.WithID("ra"))
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "retry-after", col2.handle, &ontime.TopicOptions{
			Retry: ontime.RetryPolicy{MinDelay: time.Hour, MaxAttempts: 5},
		})
	})
	col2.waitOf("ra", 2, waitTimeout, "the RetryAfter retry")
	ras := col2.of("ra")
	if gap := ras[1].StoreNow.Sub(ras[0].End); gap < 100*time.Millisecond {
		l.t.Errorf("RetryAfter(100ms): retried after %v", gap)
	}
	if ras[1].Msg.Attempt != want {
		l.t.Errorf("RetryAfter: second delivery Attempt %d, want %d", ras[1].Msg.Attempt, want)
	}
}

func libReject(l *lib) {
	c := l.client(nil)
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], _ int) error {
		if m.Body == "reject" {
			return fmt.Errorf("wrapped: %w", ontime.Drop(errors.New("not for us")))
		}
		return nil
	})
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "reject", col.handle, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MinDelay: 50 * time.Millisecond}})
	})
	id := l.publish(c, "reject", "reject")
	col.waitOf(id, 1, waitTimeout, "the dropped timer")
	l.waitAbsent(c, "reject", id)
	controlPassed(l, c, col, "reject", "control", 300*time.Millisecond)
	if n := col.countOf(id); n != 1 {
		l.t.Errorf("dropped timer delivered %d times, want once", n)
	}
	dl, err := c.DeadLetters(l.ctx, "reject", ontime.ListOptions{})
	if err != nil {
		l.t.Fatalf("DeadLetters: %v", err)
	}
	if len(dl.Dead) != 0 {
		l.t.Errorf("a dropped timer is in the dead letters: %+v", dl.Dead)
	}
	if n, _ := c.Count(l.ctx, "reject"); n != (ontime.Counts{}) {
		l.t.Errorf("Count after drop: %+v", n)
	}
}

// libLongestDelays: the longest delays a time.Duration can hold (about 292
// years) put a timer that far ahead, through In, Snooze and RetryAfter; the
// store's arithmetic never wraps them around into the past (where they
// would fire at once, again and again).
func libLongestDelays(l *lib) {
	c := l.client(nil)
	const longest = time.Duration(math.MaxInt64)
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if m.ID == "snooze" {
			return ontime.Snooze(longest)
		}
		return ontime.RetryAfter(longest, errors.New("much later"))
	})
	before := l.now()
	l.publish(c, "longest", "x", ontime.WithID("in"), ontime.In(longest))
	l.publish(c, "longest", "x", ontime.WithID("snooze"))
	l.publish(c, "longest", "x", ontime.WithID("retry"))
	l.start(c, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "longest", col.handle, nil) })
	col.waitOf("snooze", 1, waitTimeout, "the snoozing delivery")
	col.waitOf("retry", 1, waitTimeout, "the retrying delivery")
	for _, id := range []string{"in", "snooze", "retry"} {
		WaitFor(l.t, waitTimeout, func() bool {
			ti, err := c.Get(l.ctx, "longest", id)
			return err == nil && ti.State == ontime.StateScheduled && ti.Due.After(before.Add(longest-time.Hour))
		}, id+" to be scheduled about 292 years ahead")
	}
	time.Sleep(200 * time.Millisecond)
	if n := col.count(); n != 2 {
		l.t.Errorf("%d deliveries, want 2 (snooze and retry once each; in never)", n)
	}
}

func libSnooze(l *lib) {
	c := l.client(nil)
	const snooze = 250 * time.Millisecond
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if nth < 2 {
			return ontime.Snooze(snooze)
		}
		return nil
	})
	col.readEnd = true
	l.publish(c, "snooze", "x", ontime.WithID("s"))
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "snooze", col.handle, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MaxAttempts: 1}})
	})
	// MaxAttempts 1: if a snooze counted as an attempt, the third delivery
	// could not happen (a failure would dead-letter it at once).
	col.waitOf("s", 3, 2*waitTimeout, "two snoozes and a last delivery")
	l.waitAbsent(c, "snooze", "s")
	ss := col.of("s")
	for i := 1; i < len(ss); i++ {
		if gap := ss[i].StoreNow.Sub(ss[i-1].End); gap < snooze {
			l.t.Errorf("delivery %d came %v after the snooze, want at least %v", i+1, gap, snooze)
		}
		if ss[i].Msg.Attempt != 1 {
			l.t.Errorf("delivery %d after a snooze: Attempt %d, want 1 (a snooze is not an attempt)", i+1, ss[i].Msg.Attempt)
		}
		if ss[i].Msg.Body != "x" || ss[i].Msg.ID != "s" {
			l.t.Errorf("snoozed timer changed: %q/%q", ss[i].Msg.ID, ss[i].Msg.Body)
		}
	}
}

func libMaxAttempts(l *lib) {
	if l.lacks.NoAttempts {
		l.t.Skip("the driver keeps no attempt counter (Features.NoAttempts): the library cannot tell the last attempt, a failing timer is retried forever")
	}
	c := l.client(nil)
	var succeed atomic.Bool
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if succeed.Load() || m.ID != "m" {
			return nil
		}
		return fmt.Errorf("fail %d", m.Attempt)
	})
	l.publish(c, "max", "doomed", ontime.WithID("m"), ontime.WithHeader("h", "1"))
	l.start(c, nil, func(w *ontime.Worker) error {
		return ontime.Handle(w, "max", col.handle, &ontime.TopicOptions{
			Retry: ontime.RetryPolicy{MinDelay: 30 * time.Millisecond, MaxDelay: 60 * time.Millisecond, MaxAttempts: 3},
		})
	})
	col.waitOf("m", 3, waitTimeout, "three attempts")
	l.waitAbsent(c, "max", "m")
	controlPassed(l, c, col, "max", "control", 300*time.Millisecond)
	ms := col.of("m")
	if len(ms) != 3 {
		l.t.Fatalf("%d deliveries, want MaxAttempts = 3", len(ms))
	}
	for i, s := range ms {
		if s.Msg.Attempt != i+1 {
			l.t.Errorf("delivery %d: Attempt %d", i+1, s.Msg.Attempt)
		}
	}
	dl, err := c.DeadLetters(l.ctx, "max", ontime.ListOptions{})
	if err != nil {
		l.t.Fatalf("DeadLetters: %v", err)
	}
	if l.lacks.NoDeadLetters {
		if len(dl.Dead) != 0 {
			l.t.Errorf("driver lacks dead letters but DeadLetters lists %d", len(dl.Dead))
		}
		l.t.Log("the driver lacks dead letters (Features.NoDeadLetters): checked that the timer was deleted after its last attempt")
		return
	}
	if len(dl.Dead) != 1 {
		l.t.Fatalf("DeadLetters: %d, want 1", len(dl.Dead))
	}
	d := dl.Dead[0]
	if d.ID != "m" || d.Topic != "max" || d.Reason != ontimedriver.ReasonMaxAttempts || d.Attempt != 3 || string(d.Body) != "doomed" || d.Headers["h"] != "1" {
		l.t.Errorf("dead letter %+v; want id m, reason %s, attempt 3, body doomed, header h=1", d, ontimedriver.ReasonMaxAttempts)
	}
	if !l.lacks.NoLastError && d.LastError != "fail 3" {
		l.t.Errorf("dead letter LastError %q, want %q", d.LastError, "fail 3")
	}
	if n, _ := c.Count(l.ctx, "max"); n.Dead != 1 || n.Scheduled+n.Leased != 0 {
		l.t.Errorf("Count: %+v, want 1 dead", n)
	}

	// No ids is refused, never "all": nothing is replayed or purged.
	if n, err := c.ReplayDeadLetters(l.ctx, "max"); !errors.Is(err, ontime.ErrInvalid) || n != 0 {
		l.t.Errorf("ReplayDeadLetters with no ids: %d, %v; want 0, ErrInvalid", n, err)
	}
	if n, err := c.PurgeDeadLetters(l.ctx, "max", []string{}...); !errors.Is(err, ontime.ErrInvalid) || n != 0 {
		l.t.Errorf("PurgeDeadLetters with no ids: %d, %v; want 0, ErrInvalid", n, err)
	}
	if n, _ := c.Count(l.ctx, "max"); n.Dead != 1 {
		l.t.Fatalf("Count after ReplayDeadLetters and PurgeDeadLetters with no ids: %+v, want the dead letter kept", n)
	}

	succeed.Store(true)
	n, err := c.ReplayAllDeadLetters(l.ctx, "max")
	if err != nil || n != 1 {
		l.t.Fatalf("ReplayAllDeadLetters: %d, %v; want 1", n, err)
	}
	col.waitOf("m", 4, waitTimeout, "the replayed timer")
	l.waitAbsent(c, "max", "m")
	if s := col.of("m")[3]; s.Msg.Attempt != 1 || s.Msg.Body != "doomed" {
		l.t.Errorf("replayed delivery: Attempt %d body %q; want attempt 1 (reset)", s.Msg.Attempt, s.Msg.Body)
	}
	if dl, _ := c.DeadLetters(l.ctx, "max", ontime.ListOptions{}); len(dl.Dead) != 0 {
		l.t.Errorf("dead letters after replay: %+v", dl.Dead)
	}
}

func libDeadLetterOutcome(l *lib) {
	c := l.client(nil)
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], _ int) error {
		if m.Body == "control" {
			return nil
		}
		return ontime.DeadLetter(errors.New("poison"))
	})
	l.start(c, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "dlo", col.handle, nil) })
	id := l.publish(c, "dlo", "x")
	col.waitOf(id, 1, waitTimeout, "the timer")
	l.waitAbsent(c, "dlo", id)
	controlPassed(l, c, col, "dlo", "control", 200*time.Millisecond)
	if n := col.countOf(id); n != 1 {
		l.t.Errorf("delivered %d times, want once", n)
	}
	dl, err := c.DeadLetters(l.ctx, "dlo", ontime.ListOptions{})
	if err != nil {
		l.t.Fatalf("DeadLetters: %v", err)
	}
	if l.lacks.NoDeadLetters {
		if len(dl.Dead) != 0 {
			l.t.Errorf("driver lacks dead letters but lists %d", len(dl.Dead))
		}
		return
	}
	if len(dl.Dead) != 1 || dl.Dead[0].ID != id || dl.Dead[0].Reason != ontimedriver.ReasonRejected || dl.Dead[0].LastError != "poison" {
		l.t.Errorf("dead letters %+v; want %s with reason %s and error poison", dl.Dead, id, ontimedriver.ReasonRejected)
	}
}

func libUndecodable(l *lib) {
	c := l.client(nil)
	garbage := []byte("garbage\x00\x01 not an envelope")
	if l.legacy {
		// Legacy payloads: anything that is not an envelope is a raw body.
		col := collect[[]byte](l, nil)
		l.start(c, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "undec", col.handle, nil) })
		l.put("undec", ontimedriver.NewTimer{ID: "bad", Payload: garbage})
		col.waitOf("bad", 1, waitTimeout, "the raw payload")
		l.waitAbsent(c, "undec", "bad")
		s := col.of("bad")[0]
		if !bytes.Equal(s.Msg.Body, garbage) || s.Msg.CorrelationID != "bad" || len(s.Msg.Headers) != 0 {
			l.t.Errorf("raw payload delivered as body %q, correlation id %q, headers %v; want the bytes, the timer id, none", s.Msg.Body, s.Msg.CorrelationID, s.Msg.Headers)
		}
		l.t.Log("the driver accepts legacy payloads: checked that garbage is delivered as a raw body")
		return
	}

	col := collect[string](l, nil)
	typed := collect[invoice](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error {
		return errors.Join(
			ontime.Handle(w, "undec", col.handle, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MinDelay: 20 * time.Millisecond}}),
			ontime.Handle(w, "undec-typed", typed.handle, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MinDelay: 20 * time.Millisecond}}),
		)
	})
	for i := range 3 {
		l.publish(c, "undec", "good", ontime.WithID(fmt.Sprintf("g%d", i)))
	}
	l.put("undec", ontimedriver.NewTimer{ID: "bad", Payload: garbage})
	for i := 3; i < 6; i++ {
		l.publish(c, "undec", "good", ontime.WithID(fmt.Sprintf("g%d", i)), ontime.In(50*time.Millisecond))
	}
	// A valid envelope whose body does not decode into the handler's type.
	l.publish(c, "undec-typed", "not json", ontime.WithID("text-for-json"))
	l.publish(c, "undec-typed", invoice{ID: 1}, ontime.WithID("ok"))

	col.wait(6, waitTimeout, "the good timers")
	typed.waitOf("ok", 1, waitTimeout, "the good typed timer")
	l.waitAbsent(c, "undec", "bad")
	l.waitAbsent(c, "undec-typed", "text-for-json")
	controlPassed(l, c, col, "undec", "control", 200*time.Millisecond)
	if n := col.countOf("bad"); n != 0 {
		l.t.Errorf("the garbage payload reached the handler %d times", n)
	}
	if n := typed.countOf("text-for-json"); n != 0 {
		l.t.Errorf("a body that does not decode into the handler's type reached it %d times", n)
	}
	for topic, id := range map[string]string{"undec": "bad", "undec-typed": "text-for-json"} {
		dl, err := c.DeadLetters(l.ctx, topic, ontime.ListOptions{})
		if err != nil {
			l.t.Fatalf("DeadLetters: %v", err)
		}
		if l.lacks.NoDeadLetters {
			if len(dl.Dead) != 0 {
				l.t.Errorf("%s: driver lacks dead letters but lists %d", topic, len(dl.Dead))
			}
			continue
		}
		if len(dl.Dead) != 1 {
			l.t.Errorf("%s: %d dead letters, want exactly 1: %+v", topic, len(dl.Dead), dl.Dead)
			continue
		}
		d := dl.Dead[0]
		if d.ID != id || d.Reason != ontimedriver.ReasonUndecodable || d.LastError == "" {
			l.t.Errorf("%s: dead letter %s reason %q error %q; want %s, %q, the decode error", topic, d.ID, d.Reason, d.LastError, id, ontimedriver.ReasonUndecodable)
		}
		if d.Attempt != 1 && !l.lacks.NoAttempts {
			l.t.Errorf("%s: dead letter after %d attempts, want 1 (bad data is never retried)", topic, d.Attempt)
		}
		if id == "bad" && (d.DecodeError == "" || !bytes.Equal(d.Body, garbage)) {
			l.t.Errorf("dead letter of garbage: DecodeError %q, Body %q; want the error and the raw bytes", d.DecodeError, d.Body)
		}
	}
}

func libRearm(l *lib) {
	c := l.client(nil)
	var rearmDue atomic.Pointer[time.Time]
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if nth == 0 && m.ID == "tick" {
			res, err := c.PublishBatch(ctx, "rearm", []ontime.Timer{{ID: m.ID, Body: "second", Delay: 300 * time.Millisecond}})
			if err != nil {
				return ontime.Drop(err)
			}
			rearmDue.Store(&res[0].Due)
		}
		return nil
	})
	l.start(c, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "rearm", col.handle, nil) })
	l.publish(c, "rearm", "first", ontime.WithID("tick"))
	col.waitOf("tick", 2, waitTimeout, "the re-armed timer")
	l.waitAbsent(c, "rearm", "tick")
	controlPassed(l, c, col, "rearm", "control", 200*time.Millisecond)
	ss := col.of("tick")
	if len(ss) != 2 {
		l.t.Fatalf("%d deliveries, want 2", len(ss))
	}
	if ss[0].Msg.Body != "first" || ss[1].Msg.Body != "second" {
		l.t.Errorf("bodies %q, %q", ss[0].Msg.Body, ss[1].Msg.Body)
	}
	if d := rearmDue.Load(); d == nil {
		l.t.Error("the re-arm publish failed")
	} else {
		wantOnTime(l, "re-armed timer", ss[1], *d)
	}
	if ss[1].Msg.Attempt != 1 {
		l.t.Errorf("re-armed timer Attempt %d, want 1 (a fresh timer)", ss[1].Msg.Attempt)
	}
}

func libTopics(l *lib) {
	c := l.client(nil)
	plain := collect[string](l, nil)
	billing := collect[string](l, nil)
	nested := collect[string](l, nil)
	l.start(c, nil, func(w *ontime.Worker) error {
		r := w.Router("billing:")
		return errors.Join(
			ontime.Handle(w, "invoices", plain.handle, nil),
			ontime.Handle(r, "invoices", billing.handle, nil),
			ontime.Handle(r.Router("eu."), "invoices", nested.handle, nil),
		)
	})
	// A Client with a prefix on the same store.
	pc := l.client(&ontime.Config{Prefix: "app."})
	prefixed := collect[string](l, nil)
	l.start(pc, nil, func(w *ontime.Worker) error { return ontime.Handle(w, "invoices", prefixed.handle, nil) })

	l.publish(c, "invoices", "plain", ontime.WithID("i1"))
	l.publish(c, "billing:invoices", "billing", ontime.WithID("i2"))
	l.publish(c, "billing:eu.invoices", "nested", ontime.WithID("i3"))
	l.publish(pc, "invoices", "prefixed", ontime.WithID("i4"))

	for _, x := range []struct {
		col   *collector[string]
		topic string
		id    string
		body  string
	}{
		{plain, "invoices", "i1", "plain"},
		{billing, "billing:invoices", "i2", "billing"},
		{nested, "billing:eu.invoices", "i3", "nested"},
		{prefixed, "app.invoices", "i4", "prefixed"},
	} {
		x.col.waitOf(x.id, 1, waitTimeout, x.topic)
	}
	// Every topic's timers are gone, so nothing more can come.
	for _, topic := range []string{"invoices", "billing:invoices", "billing:eu.invoices", "app.invoices"} {
		l.waitEmpty(c, topic, waitTimeout)
	}
	for _, x := range []struct {
		col   *collector[string]
		topic string
		id    string
		body  string
	}{
		{plain, "invoices", "i1", "plain"},
		{billing, "billing:invoices", "i2", "billing"},
		{nested, "billing:eu.invoices", "i3", "nested"},
		{prefixed, "app.invoices", "i4", "prefixed"},
	} {
		got := x.col.all()
		if len(got) != 1 || got[0].Msg.ID != x.id || got[0].Msg.Body != x.body || got[0].Msg.Topic != x.topic {
			var desc []string
			for _, s := range got {
				desc = append(desc, fmt.Sprintf("%s@%s=%q", s.Msg.ID, s.Msg.Topic, s.Msg.Body))
			}
			l.t.Errorf("handler of %s got %v, want just %s@%s", x.topic, desc, x.id, x.topic)
		}
	}

	// The prefix is applied on every call and stripped from Topics.
	l.publish(pc, "later", "x", ontime.In(time.Hour), ontime.WithID("p1"))
	l.publish(c, "other", "x", ontime.In(time.Hour), ontime.WithID("o1"))
	if _, err := c.Get(l.ctx, "app.later", "p1"); err != nil {
		l.t.Errorf("the prefixed timer is not at its full topic: %v", err)
	}
	if ti, err := pc.Get(l.ctx, "later", "p1"); err != nil || ti.Topic != "later" {
		l.t.Errorf("Get through the prefixed Client: %+v, %v", ti, err)
	}
	topics, err := pc.Topics(l.ctx)
	if err != nil {
		l.t.Fatalf("Topics: %v", err)
	}
	if !slicesEqual(topics, []string{"later"}) {
		l.t.Errorf("prefixed Client Topics = %q, want [later]", topics)
	}
	all, err := c.Topics(l.ctx)
	if err != nil {
		l.t.Fatalf("Topics: %v", err)
	}
	for _, want := range []string{"app.later", "other"} {
		if !contains(all, want) {
			l.t.Errorf("Topics = %q, missing %q", all, want)
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func libPanic(l *lib) {
	c := l.client(nil)
	col := collect[string](l, func(ctx context.Context, m *ontime.Message[string], nth int) error {
		if m.Body == "panic" && nth == 0 {
			panic("handler bug")
		}
		return nil
	})
	logger, logs := l.recordLogs()
	l.start(c, &ontime.WorkerConfig{Logger: logger}, func(w *ontime.Worker) error {
		return ontime.Handle(w, "panic", col.handle, &ontime.TopicOptions{
			MaxConcurrency: 1,
			Retry:          ontime.RetryPolicy{MinDelay: 100 * time.Millisecond, Jitter: -1},
		})
	})
	l.publish(c, "panic", "panic", ontime.WithID("p"))
	col.waitOf("p", 1, waitTimeout, "the panicking delivery")
	// The worker keeps running: later timers flow, and the panic is retried.
	l.publish(c, "panic", "after", ontime.WithID("a"))
	col.waitOf("a", 1, waitTimeout, "a timer after the panic")
	col.waitOf("p", 2, waitTimeout, "the retry after the panic")
	l.waitAbsent(c, "panic", "p")
	ps := col.of("p")
	want := 2
	if l.lacks.NoAttempts {
		want = 1
	}
	if ps[1].Msg.Attempt != want {
		l.t.Errorf("retry after a panic: Attempt %d, want %d (a panic counts as a failure)", ps[1].Msg.Attempt, want)
	}
	if gap := ps[1].StoreNow.Sub(ps[0].StoreNow); gap < 100*time.Millisecond {
		l.t.Errorf("retried %v after the panic, want the retry delay", gap)
	}
	// The panic is in the worker's log, once, at error level, with its
	// value and the stack of the panicking handler.
	recs := logs.matching("panicked")
	if len(recs) != 1 {
		l.t.Fatalf("%d log records about the panic, want 1: %+v", len(recs), recs)
	}
	r := recs[0]
	if r.Level != slog.LevelError || r.Attrs["panic"] != "handler bug" || r.Attrs["id"] != "p" || r.Attrs["topic"] != "panic" {
		l.t.Errorf("panic log record %s %q %v; want level ERROR with panic=%q, id=p, topic=panic", r.Level, r.Msg, r.Attrs, "handler bug")
	}
	stack := r.Attrs["stack"]
	for _, want := range []string{
		"goroutine ",           // a Go stack trace
		"panic(",               // through the panic
		"drivertest.libPanic.", // the handler that panicked (a closure in libPanic)
	} {
		if !strings.Contains(stack, want) {
			l.t.Errorf("the panic's stack in the log does not mention %q:\n%s", want, stack)
		}
	}
}
