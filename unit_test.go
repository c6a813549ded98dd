package ontime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/envelope"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

var quietLog = slog.New(slog.DiscardHandler)

// nopDriver satisfies ontimedriver.Driver for tests that never reach the
// store; any call panics.
type nopDriver struct{ ontimedriver.Driver }

func TestRetryDefaultsIdempotent(t *testing.T) {
	// The policy is defaulted at Handle and again inside Backoff: a second
	// pass must not turn "no jitter" back into the 0.2 default.
	p := RetryPolicy{MinDelay: 100 * time.Millisecond, Jitter: -1}.withDefaults()
	if p2 := p.withDefaults(); p2 != p {
		t.Fatalf("withDefaults not idempotent: %+v then %+v", p, p2)
	}
	for range 100 {
		if d := p.Backoff(1); d != 100*time.Millisecond {
			t.Fatalf("Backoff(1) with Jitter -1 = %v, want exactly MinDelay", d)
		}
	}
	if err := p.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	// A big MinDelay raises the default MaxDelay with it.
	big := RetryPolicy{MinDelay: time.Hour}.withDefaults()
	if big.MaxDelay != time.Hour || big.validate() != nil {
		t.Fatalf("MinDelay 1h: %+v", big)
	}
	if d := (RetryPolicy{MinDelay: time.Second, MaxDelay: 5 * time.Second, Jitter: -1}).Backoff(1000); d != 5*time.Second {
		t.Fatalf("Backoff(1000) = %v, want MaxDelay", d)
	}
	if d := (RetryPolicy{}).Backoff(0); d < 800*time.Millisecond || d > 1200*time.Millisecond {
		t.Fatalf("Backoff(0) = %v, want about MinDelay", d)
	}
}

func TestTopicOptionsMerge(t *testing.T) {
	def := TopicOptions{MaxConcurrency: 4, Lease: time.Minute, Retry: RetryPolicy{MaxAttempts: 3}, DisableHeartbeat: true}.withDefaults()
	got := TopicOptions{MaxConcurrency: 2}.merge(def)
	if got.MaxConcurrency != 2 || got.Lease != time.Minute || got.PollInterval != time.Second || got.ClaimBatch != 256 ||
		got.Retry.MaxAttempts != 3 || !got.DisableHeartbeat {
		t.Fatalf("merge: %+v", got)
	}
	// Retry is merged field by field: a topic that sets only MinDelay keeps
	// the Worker's MaxAttempts (it used to take the whole default policy
	// only when its own was entirely zero).
	got = TopicOptions{Retry: RetryPolicy{MinDelay: 10 * time.Millisecond}}.merge(def)
	if got.Retry.MinDelay != 10*time.Millisecond || got.Retry.MaxAttempts != 3 {
		t.Fatalf("Retry merged %+v, want MinDelay 10ms from the topic and MaxAttempts 3 from the defaults", got.Retry)
	}
	got = TopicOptions{Retry: RetryPolicy{MaxAttempts: RetryForever, Jitter: -1}}.merge(TopicOptions{Retry: RetryPolicy{MaxAttempts: 3, Jitter: 0.5, Multiplier: 3}})
	if got.Retry.MaxAttempts != RetryForever || got.Retry.Jitter != -1 || got.Retry.Multiplier != 3 {
		t.Fatalf("Retry merged %+v, want the topic's MaxAttempts and Jitter, the default's Multiplier", got.Retry)
	}
	// DisableHeartbeat: false is the zero value and takes the default.
	if got := (TopicOptions{}).merge(TopicOptions{DisableHeartbeat: true}); !got.DisableHeartbeat {
		t.Fatal("DisableHeartbeat in the defaults did not reach a topic")
	}
	if got := (TopicOptions{DisableHeartbeat: true}).merge(TopicOptions{}); !got.DisableHeartbeat {
		t.Fatal("a topic's DisableHeartbeat was lost")
	}
	if err := (TopicOptions{ClaimBatch: -1}).withDefaults().validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "ClaimBatch") {
		t.Fatalf("ClaimBatch -1: %v", err)
	}
	if err := (TopicOptions{}).withDefaults().validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

func TestNewClientValidation(t *testing.T) {
	if _, err := NewClient(nil, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil driver: %v", err)
	}
	if _, err := NewClient(nopDriver{}, &Config{Prefix: "a b"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Prefix") {
		t.Errorf("bad prefix: %v", err)
	}
	c, err := NewClient(nopDriver{}, &Config{Prefix: "app:"})
	if err != nil {
		t.Fatal(err)
	}
	if c.maxBody != 1<<20 || c.log == nil || c.lenient {
		t.Errorf("defaults: maxBody %d log %v lenient %v", c.maxBody, c.log, c.lenient)
	}
	if full, err := c.fullTopic("jobs"); err != nil || full != "app:jobs" {
		t.Errorf("fullTopic: %q, %v", full, err)
	}
	if _, err := c.fullTopic(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty topic: %v", err)
	}
}

func TestEncodeTimer(t *testing.T) {
	c, _ := NewClient(nopDriver{}, &Config{Logger: quietLog, MaxBodyBytes: 100})
	nt, err := c.encodeTimer(&Timer{ID: "x", Body: "hi", Headers: map[string]string{"b": "2", "a": "1"}, Delay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if nt.ID != "x" || nt.Delay != time.Second || !nt.At.IsZero() {
		t.Errorf("timer: %+v", nt)
	}
	env, err := envelope.DecodeBinary(nt.Payload)
	if err != nil {
		t.Fatal(err)
	}
	want := []envelope.Header{{Key: "correlation_id", Value: "x"}, {Key: "content-type", Value: "text/plain"}, {Key: "a", Value: "1"}, {Key: "b", Value: "2"}}
	if fmt.Sprint(env.Headers) != fmt.Sprint(want) || string(env.Body) != "hi" {
		t.Errorf("envelope headers %v body %q; want %v (user headers in key order)", env.Headers, env.Body, want)
	}
	// A random id (prepare gives it), and the correlation id follows it.
	nt, err = c.encodeTimer(&prepare([]Timer{{Body: []byte{1}}}, true, false)[0])
	if err != nil || len(nt.ID) != 36 {
		t.Fatalf("random id: %q, %v", nt.ID, err)
	}
	env, _ = envelope.DecodeBinary(nt.Payload)
	if corr, _ := env.Get("correlation_id"); corr != nt.ID {
		t.Errorf("correlation id %q, want the id %q", corr, nt.ID)
	}
	if _, ok := env.Get("content-type"); ok {
		t.Error("raw bytes got a content type")
	}
	for name, tm := range map[string]Timer{
		"negative delay":   {ID: "x", Delay: -1},
		"delay and At":     {ID: "x", Delay: time.Second, At: time.Now()},
		"bad id":           {ID: "a\nb"},
		"no id":            {},
		"empty header key": {ID: "x", Headers: map[string]string{"": "v"}},
		"too big":          {ID: "x", Body: strings.Repeat("x", 200)},
		"bad raw json":     {ID: "x", Body: json.RawMessage("{")},
		"func body":        {ID: "x", Body: func() {}},
	} {
		if _, err := c.encodeTimer(&tm); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// json.RawMessage is compacted and sent as JSON.
	b, ct, err := encodeBody(json.RawMessage("{ \"a\" : 1 }"))
	if err != nil || string(b) != `{"a":1}` || ct != envelope.ContentTypeJSON {
		t.Errorf("RawMessage: %q %q %v", b, ct, err)
	}
}

func TestPublishOptions(t *testing.T) {
	c, _ := NewClient(nopDriver{}, &Config{Logger: quietLog})
	// Both In and At are refused before the store is touched (nopDriver
	// would panic).
	if _, err := c.Publish(context.Background(), "t", "x", In(0), At(time.Now())); !errors.Is(err, ErrInvalid) {
		t.Errorf("In(0) and At: %v", err)
	}
	var tm Timer
	var m publishMode
	for _, o := range []PublishOption{WithHeader("a", "1"), WithHeaders(map[string]string{"b": "2"}), WithCorrelationID("c"), WithID("i"), IfAbsent()} {
		o(&tm, &m)
	}
	if tm.Headers["a"] != "1" || tm.Headers["b"] != "2" || tm.CorrelationID != "c" || tm.ID != "i" || !m.ifAbsent {
		t.Errorf("options: %+v %+v", tm, m)
	}
	var bm publishMode
	BatchIfAbsent()(&bm)
	if !bm.ifAbsent {
		t.Error("BatchIfAbsent")
	}
}

func TestBodyDecoder(t *testing.T) {
	var b []byte
	if err := bodyDecoder[[]byte]()([]byte{1, 2}, "", &b); err != nil || string(b) != "\x01\x02" {
		t.Errorf("[]byte: %q %v", b, err)
	}
	var s string
	if err := bodyDecoder[string]()([]byte("hé"), "", &s); err != nil || s != "hé" {
		t.Errorf("string: %q %v", s, err)
	}
	var r json.RawMessage
	if err := bodyDecoder[json.RawMessage]()([]byte(`{"a":1}`), "", &r); err != nil || string(r) != `{"a":1}` {
		t.Errorf("RawMessage: %q %v", r, err)
	}
	type v struct{ N int }
	var x v
	if err := bodyDecoder[v]()([]byte(`{"N":3}`), "", &x); err != nil || x.N != 3 {
		t.Errorf("struct: %+v %v", x, err)
	}
	x = v{}
	if err := bodyDecoder[v]()(nil, "", &x); err != nil || x.N != 0 {
		t.Errorf("empty body: %+v %v", x, err)
	}
	if err := bodyDecoder[v]()([]byte("not json"), "", &x); err == nil || !strings.Contains(err.Error(), "ontime.v") {
		t.Errorf("bad JSON: %v, want an error naming the type", err)
	}
	var p *v
	if err := bodyDecoder[*v]()([]byte(`{"N":4}`), "", &p); err != nil || p == nil || p.N != 4 {
		t.Errorf("pointer: %+v %v", p, err)
	}
	// any follows the content type, as the Python reader's Any does: text
	// is a string even when it is not JSON (it used to fail to decode, and
	// the timer was dead-lettered), or when it is ("42" stays a string).
	for _, c := range []struct {
		body, ct string
		want     any
	}{
		{"hello", "text/plain", "hello"},
		{"42", "text/plain", "42"},
		{`{"a":1}`, "application/json", map[string]any{"a": 1.0}},
		{`[1,"x"]`, "application/json; charset=utf-8", []any{1.0, "x"}},
		{"\x00\xff", "application/octet-stream", []byte("\x00\xff")},
		{`{"a":1}`, "", map[string]any{"a": 1.0}},
		{"not json", "", []byte("not json")},
		{"", "text/plain", nil},
	} {
		var a any
		if err := bodyDecoder[any]()([]byte(c.body), c.ct, &a); err != nil || !reflect.DeepEqual(a, c.want) {
			t.Errorf("any, body %q, content type %q: %#v %v, want %#v", c.body, c.ct, a, err, c.want)
		}
	}
}

func TestSplitHeaders(t *testing.T) {
	corr, ct, user := splitHeaders(&envelope.Message{Headers: []envelope.Header{
		{Key: "correlation_id", Value: "c"}, {Key: "content-type", Value: "text/plain"}, {Key: "x", Value: "1"},
	}}, "id")
	if corr != "c" || ct != "text/plain" || len(user) != 1 || user["x"] != "1" {
		t.Errorf("%q %q %v", corr, ct, user)
	}
	// No correlation id (legacy, raw): the timer id stands for it.
	if corr, _, user := splitHeaders(&envelope.Message{}, "id"); user != nil || corr != "id" {
		t.Errorf("no headers: %q, %v; want the id, no user headers", corr, user)
	}
}

func TestOutcomes(t *testing.T) {
	base := errors.New("base")
	for _, err := range []error{Drop(base), Reject(base), DeadLetter(base), RetryAfter(time.Second, base)} {
		if !errors.Is(err, base) {
			t.Errorf("%v does not wrap its error", err)
		}
	}
	var se *SnoozeError
	if !errors.As(Snooze(-time.Second), &se) || se.Delay != 0 {
		t.Errorf("Snooze(-1s): %+v", se)
	}
	var re *RetryAfterError
	if !errors.As(RetryAfter(-time.Second, nil), &re) || re.Delay != 0 {
		t.Errorf("RetryAfter(-1s): %+v", re)
	}
	var de *DropError
	if !errors.As(fmt.Errorf("x: %w", Reject(base)), &de) || de.Err != base {
		t.Errorf("Reject is not Drop: %+v", de)
	}
	for _, err := range []error{Snooze(time.Second), Drop(nil), DeadLetter(base), RetryAfter(time.Second, base)} {
		if err.Error() == "" {
			t.Errorf("%#v: empty message", err)
		}
	}
	for _, c := range []struct {
		err  error
		want Outcome
	}{
		{nil, OutcomeAcked},
		{base, OutcomeRetried},
		{&PanicError{Value: 1}, OutcomeRetried},
		{Snooze(time.Second), OutcomeSnoozed},
		{fmt.Errorf("wrapped: %w", Snooze(time.Second)), OutcomeSnoozed},
		{Drop(base), OutcomeDropped},
		{DeadLetter(base), OutcomeDeadLettered},
		{RetryAfter(time.Second, base), OutcomeRetried},
		{&undecodableError{base}, OutcomeDeadLettered},
		// The outermost outcome wins, as the worker decides.
		{Drop(Snooze(time.Second)), OutcomeDropped},
		{DeadLetter(Drop(nil)), OutcomeDeadLettered},
	} {
		if got := OutcomeOf(c.err); got != c.want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if OutcomeRejected != OutcomeDropped || OutcomeDropped.String() != "dropped" {
		t.Errorf("OutcomeRejected %v, OutcomeDropped %q", OutcomeRejected, OutcomeDropped)
	}
}

// A Message no worker delivered (a literal) does not panic when settled
// by hand: it has no timer to settle.
func TestLiteralMessageSettles(t *testing.T) {
	ctx := context.Background()
	m := &Message[string]{ID: "x", Body: "hi"}
	for name, err := range map[string]error{
		"Ack": m.Ack(ctx), "Nack": m.Nack(ctx, nil), "Drop": m.Drop(ctx, nil), "Reject": m.Reject(ctx, nil),
		"DeadLetter": m.DeadLetter(ctx, nil), "Snooze": m.Snooze(ctx, time.Second),
	} {
		if !errors.Is(err, ErrNotDelivered) {
			t.Errorf("%s: %v, want ErrNotDelivered", name, err)
		}
	}
}

func TestStopUnstartedWorker(t *testing.T) {
	c, _ := NewClient(nopDriver{}, &Config{Logger: quietLog})
	w := NewWorker(c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i := range 2 {
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("Stop #%d of a worker that never ran: %v", i+1, err)
		}
	}
	if err := w.Run(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after Stop: %v, want ErrStopped", err)
	}
	if h := w.Health(); !h.Healthy {
		t.Fatalf("Health: %+v", h)
	}
}

// closeAfter forwards to a real embedded store and closes it right after
// the n-th Schedule call has returned, as if the store went away between
// two chunks of a batch. Every call still reaches the real store.
type closeAfter struct {
	*ontimebolt.Driver
	n, calls int
}

func (d *closeAfter) Schedule(ctx context.Context, topic string, ts []ontimedriver.NewTimer, m ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	res, err := d.Driver.Schedule(ctx, topic, ts, m)
	if d.calls++; d.calls == d.n {
		if cerr := d.Driver.Close(); cerr != nil {
			panic(cerr)
		}
	}
	return res, err
}

// listAll returns every timer of topic, by id.
func listAll(t *testing.T, c *Client, topic string) map[string]TimerInfo {
	t.Helper()
	out := map[string]TimerInfo{}
	opts := ListOptions{Limit: 1000}
	for {
		p, err := c.List(context.Background(), topic, opts)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, ti := range p.Timers {
			if _, dup := out[ti.ID]; dup {
				t.Fatalf("List returned %q twice", ti.ID)
			}
			out[ti.ID] = ti
		}
		if p.NextCursor == "" {
			return out
		}
		opts.Cursor = p.NextCursor
	}
}

// checkBatchInStore asserts that the store holds exactly the timers of res
// (with their due times), plus the ids in keep, and none of the other ids
// the BatchError lists.
func checkBatchInStore(t *testing.T, stored map[string]TimerInfo, res []PublishResult, be *BatchError, keep map[string]string) {
	t.Helper()
	want := map[string]bool{}
	for i, r := range res {
		if r.Err != nil || r.ID == "" || r.Due.IsZero() {
			t.Fatalf("result %d: %+v", i, r)
		}
		want[r.ID] = true
		ti, ok := stored[r.ID]
		switch {
		case !ok:
			t.Errorf("result %d (%s) reported written, not in the store", i, r.ID)
		case !ti.Due.Equal(r.Due):
			t.Errorf("result %d (%s): due %v reported, %v stored", i, r.ID, r.Due, ti.Due)
		}
	}
	for id, body := range keep {
		want[id] = true
		if ti, ok := stored[id]; !ok || string(ti.Body) != body {
			t.Errorf("timer %s existing before the batch: %+v, want body %q", id, ti, body)
		}
	}
	for _, id := range be.IDs {
		if _, ok := keep[id]; !ok && stored[id].ID != "" {
			t.Errorf("timer %s is in the store, but the BatchError lists it as not written", id)
		}
	}
	for id := range stored {
		if !want[id] {
			t.Errorf("timer %s is in the store, but no result reports it", id)
		}
	}
}

// A batch of four chunks whose store closes after the second: the first
// 1000 timers are reported and stored, the rest neither, and the error
// says so and wraps the store's error.
func TestPublishBatchStoreFailsMidway(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "timers.db")
	drv, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := NewClient(drv, &Config{Logger: quietLog})
	// Two timers exist before the batch: one in a chunk that gets written
	// (replaced), one in the chunk that fails (must stay as it was).
	for _, id := range []string{"t-0100", "t-1100"} {
		if _, err := c.Publish(ctx, "jobs", "old", WithID(id), In(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}

	const n = 3*BatchChunkSize + 200
	timers := make([]Timer, n)
	for i := range timers {
		timers[i] = Timer{Body: fmt.Sprintf("new %d", i), Delay: time.Duration(i+1) * time.Minute}
		if i%2 == 0 { // half caller-chosen ids, half random
			timers[i].ID = fmt.Sprintf("t-%04d", i)
		}
	}
	c.drv = &closeAfter{Driver: drv, n: 2}
	res, err := c.PublishBatch(ctx, "jobs", timers)

	var be *BatchError
	if !errors.As(err, &be) {
		t.Fatalf("PublishBatch: %v, want a *BatchError", err)
	}
	if !errors.Is(err, ontimedriver.ErrClosed) {
		t.Errorf("error %v does not unwrap to the store's ErrClosed", err)
	}
	if be.Topic != "jobs" || be.Written != 2*BatchChunkSize || be.Failed != BatchChunkSize || be.Total != n {
		t.Errorf("BatchError %+v, want Written %d Failed %d Total %d", be, 2*BatchChunkSize, BatchChunkSize, n)
	}
	for _, s := range []string{"[0, 1000) written", "[1000, 1500) failed", "[1500, 1700) not sent", ontimedriver.ErrClosed.Error()} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if len(res) != be.Written {
		t.Fatalf("%d results, want the %d written", len(res), be.Written)
	}
	if len(be.IDs) != n-be.Written {
		t.Fatalf("BatchError.IDs has %d ids, want %d", len(be.IDs), n-be.Written)
	}
	seen := map[string]bool{}
	for k, id := range be.IDs {
		if want := timers[be.Written+k].ID; (want != "" && id != want) || (want == "" && len(id) != 36) || seen[id] {
			t.Errorf("BatchError.IDs[%d] = %q, timer's id %q", k, id, want)
		}
		seen[id] = true
	}
	for i, r := range res {
		if want := timers[i].ID; want != "" && r.ID != want {
			t.Errorf("result %d id %q, want %q", i, r.ID, want)
		}
	}

	// What is on disk, read by a fresh store.
	drv2, err := ontimebolt.Open(path, &ontimebolt.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer drv2.Close()
	c2, _ := NewClient(drv2, &Config{Logger: quietLog})
	stored := listAll(t, c2, "jobs")
	checkBatchInStore(t, stored, res, be, map[string]string{"t-1100": "old"})
	if len(stored) != be.Written+1 {
		t.Errorf("%d timers stored, want %d", len(stored), be.Written+1)
	}
	if got := string(stored["t-0100"].Body); got != "new 100" {
		t.Errorf("t-0100, in a written chunk, has body %q, want the batch's", got)
	}

	// Publishing the listed ids again finishes the batch without duplicates.
	rest := timers[be.Written:]
	for k := range rest {
		rest[k].ID = be.IDs[k]
	}
	if _, err := c2.PublishBatch(ctx, "jobs", rest); err != nil {
		t.Fatal(err)
	}
	if got := len(listAll(t, c2, "jobs")); got != n {
		t.Errorf("after the retry %d timers stored, want %d", got, n)
	}
}

// A Redis that reaches maxmemory part-way through a batch: no hook, the
// real server refuses a chunk. The results returned are exactly what
// Redis holds.
func TestPublishBatchRedisOutOfMemory(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	rdb := srv.NewClient(t)
	drv, err := ontimeredis.New(rdb, &ontimeredis.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	c, _ := NewClient(drv, &Config{Logger: quietLog})
	if _, err := c.Publish(ctx, "jobs", "old", WithID("t-9999"), In(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Leave room for about two chunks of 1 KiB timers.
	used, err := usedMemory(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+1<<20, 10)).Err(); err != nil {
		t.Fatal(err)
	}

	const n = 10 * BatchChunkSize
	body := strings.Repeat("x", 1024)
	timers := make([]Timer, n)
	for i := range timers {
		timers[i] = Timer{ID: fmt.Sprintf("t-%04d", i), Body: body, Delay: time.Duration(i+1) * time.Minute}
	}
	res, err := c.PublishBatch(ctx, "jobs", timers)
	var be *BatchError
	if !errors.As(err, &be) {
		t.Fatalf("PublishBatch into a full Redis: %v, want a *BatchError", err)
	}
	t.Logf("%v", err)
	if !strings.Contains(be.Err.Error(), "OOM") {
		t.Errorf("store error %v, want Redis's OOM", be.Err)
	}
	if be.Written == 0 || be.Written%BatchChunkSize != 0 || be.Failed != BatchChunkSize || be.Total != n || len(res) != be.Written {
		t.Fatalf("BatchError %+v with %d results: want a whole number of chunks (at least one) written, and their results", be, len(res))
	}
	for k, id := range be.IDs {
		if id != timers[be.Written+k].ID {
			t.Fatalf("BatchError.IDs[%d] = %q, want %q", k, id, timers[be.Written+k].ID)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	stored := listAll(t, c, "jobs")
	checkBatchInStore(t, stored, res, be, map[string]string{"t-9999": "old"})
	if len(stored) != be.Written+1 {
		t.Errorf("%d timers stored, want %d", len(stored), be.Written+1)
	}
}

func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}

// WithID("") is refused, not turned into a random id; nothing is stored.
// Timer.ID "" in a batch still means a random UUID, as documented.
func TestPublishEmptyIDRefused(t *testing.T) {
	ctx := context.Background()
	drv, err := ontimebolt.Open(filepath.Join(t.TempDir(), "timers.db"), &ontimebolt.Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	c, _ := NewClient(drv, &Config{Logger: quietLog})
	for name, opts := range map[string][]PublishOption{
		"WithID(\"\")":            {WithID("")},
		"WithID(\"a\") then \"\"": {WithID("a"), WithID(""), In(time.Hour)},
	} {
		id, err := c.Publish(ctx, "jobs", "body", opts...)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "WithID") || !strings.Contains(err.Error(), "empty") || id != "" {
			t.Errorf("%s: id %q, err %v; want ErrInvalid naming the empty WithID", name, id, err)
		}
	}
	if n, err := c.Count(ctx, "jobs"); err != nil || n.Scheduled+n.Leased != 0 {
		t.Errorf("after refused publishes: %+v, %v; want nothing stored", n, err)
	}
	if ts, err := c.Topics(ctx); err != nil || len(ts) != 0 {
		t.Errorf("topics %v, %v; want none", ts, err)
	}

	res, err := c.PublishBatch(ctx, "jobs", []Timer{{Body: "a"}, {ID: "b", Body: "b"}})
	if err != nil || len(res) != 2 || len(res[0].ID) != 36 || res[1].ID != "b" {
		t.Fatalf("PublishBatch with an empty Timer.ID: %+v, %v", res, err)
	}
	if _, err := c.Get(ctx, "jobs", res[0].ID); err != nil {
		t.Errorf("the random id %s is not stored: %v", res[0].ID, err)
	}
}

// failingDriver fails every Schedule with errDown.
type failingDriver struct{ nopDriver }

var errDown = errors.New("store down")

func (failingDriver) Schedule(context.Context, string, []ontimedriver.NewTimer, ontimedriver.ScheduleMode) ([]ontimedriver.ScheduleResult, error) {
	return nil, errDown
}

// Publish is a batch of one: a store failure is a *BatchError of one
// timer that names its random id (to publish it again without a
// duplicate), worded as a single publish; and neither Publish nor
// PublishBatch changes the caller's timers.
func TestPublishIsABatchOfOne(t *testing.T) {
	ctx := context.Background()
	c, _ := NewClient(failingDriver{}, &Config{Logger: quietLog})
	id, err := c.Publish(ctx, "jobs", "body")
	var be *BatchError
	if !errors.As(err, &be) || !errors.Is(err, errDown) || id != "" {
		t.Fatalf("Publish on a failing store: %q, %v; want a *BatchError wrapping the store's error", id, err)
	}
	if be.Total != 1 || be.Failed != 1 || be.Written != 0 || len(be.IDs) != 1 || len(be.IDs[0]) != 36 {
		t.Errorf("BatchError %+v, want one failed timer with its random id", be)
	}
	if want := `ontime: publish to "jobs": store down`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	timers := []Timer{{Body: "a", Headers: map[string]string{"k": "v"}}}
	hooked, _ := NewClient(failingDriver{}, &Config{Logger: quietLog, Hooks: []any{headerHook{}}})
	for _, c := range []*Client{c, hooked} {
		if _, err := c.PublishBatch(ctx, "jobs", timers); !errors.As(err, &be) || be.Total != 1 {
			t.Errorf("PublishBatch of one: %v", err)
		}
		if timers[0].ID != "" || len(timers[0].Headers) != 1 {
			t.Errorf("PublishBatch changed the caller's timer: %+v", timers[0])
		}
	}
}

// headerHook adds a header to every timer published.
type headerHook struct{}

func (headerHook) BeforePublish(ctx context.Context, p *PublishEvent) context.Context {
	for i := range p.Timers {
		if p.Timers[i].Headers == nil {
			p.Timers[i].Headers = map[string]string{}
		}
		p.Timers[i].Headers["added"] = "1"
	}
	return ctx
}

// The README's scenario table names runnable examples: every name it links
// is an Example function in the file it links to, and every Example
// function of the package is named there.
func TestREADMENamesTheExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile("\\[((?:`Example[A-Za-z_]*`(?:, )?)+)\\]\\((example_[a-z_]+_test\\.go|example_test\\.go)\\)")
	named := map[string]string{} // example -> file the README links
	for _, m := range link.FindAllStringSubmatch(string(readme), -1) {
		for _, n := range strings.Split(m[1], ", ") {
			named[strings.Trim(n, "`")] = m[2]
		}
	}
	files, err := filepath.Glob("example*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example files: %v", err)
	}
	fset := token.NewFileSet()
	defined := map[string]string{}
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "Example") {
				continue
			}
			defined[fd.Name.Name] = f
			if !hasOutput(af, fd) {
				t.Errorf("%s (%s) has no // Output: comment, so go test does not run it", fd.Name.Name, f)
			}
		}
	}
	for name, file := range named {
		if got, ok := defined[name]; !ok || got != file {
			t.Errorf("README links %s to %s; it is defined in %q", name, file, got)
		}
	}
	for name, file := range defined {
		if _, ok := named[name]; !ok {
			t.Errorf("%s (%s) is not named in the README's scenario table", name, file)
		}
	}
}

// hasOutput reports whether fd's body holds an "Output:" comment.
func hasOutput(af *ast.File, fd *ast.FuncDecl) bool {
	for _, cg := range af.Comments {
		if cg.Pos() > fd.Body.Lbrace && cg.End() < fd.Body.Rbrace && strings.HasPrefix(cg.Text(), "Output:") {
			return true
		}
	}
	return false
}
