package ontimeotel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
	"github.com/ontime-go/ontime/ontimeotel"
)

func TestMain(m *testing.M) { redistest.Main(m, redistest.CheckLeaks()) }

var quiet = slog.New(slog.DiscardHandler)

func openBolt(t testing.TB) ontimedriver.Driver {
	t.Helper()
	d, err := ontimebolt.Open(filepath.Join(t.TempDir(), "timers.db"), &ontimebolt.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// openCompat opens the faststream-compatible Redis layout on the test
// server, under a prefix of its own.
func openCompat(t testing.TB) ontimedriver.Driver {
	t.Helper()
	rdb := redistest.NewClient(t)
	prefix := redistest.Prefix(t)
	d, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: prefix, Layout: ontimeredis.Compatible, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Close()
		_ = redistest.DeleteKeys(context.Background(), rdb, prefix)
	})
	return d
}

// traced is a client with tracing hooks whose spans go to an in-memory
// exporter.
type traced struct {
	exp    *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	client *ontime.Client
}

func newTraced(t testing.TB, drv ontimedriver.Driver) *traced {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet, Hooks: []any{ontimeotel.New(ontimeotel.WithTracerProvider(tp))}})
	if err != nil {
		t.Fatal(err)
	}
	return &traced{exp: exp, tp: tp, client: client}
}

// spans returns the ended spans named name whose destination is topic
// (any, or none, when topic is "").
func (tr *traced) spans(name, topic string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tr.exp.GetSpans() {
		if s.Name == name && (topic == "" || attr(s, "messaging.destination.name").AsString() == topic) {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func waitSpans(t testing.TB, tr *traced, name, topic string, n int) []tracetest.SpanStub {
	t.Helper()
	wait.For(t, 10*time.Second, func() bool { return len(tr.spans(name, topic)) >= n },
		"%d %q spans of topic %s (spans: %s)", n, name, topic, func() string { return fmt.Sprint(len(tr.exp.GetSpans())) })
	return tr.spans(name, topic)
}

func run(t testing.TB, w *ontime.Worker) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
		<-done
	})
}

// TestPublishAndDeliveryLinked: the publish span is a producer span, child
// of the caller's span; the timer's headers carry its traceparent; each
// delivery is a consumer span in a trace of its own, linked to the publish
// span, with topic, id, attempt and lateness; a failed attempt is an
// error; a span the handler starts is a child of the delivery span. On the
// embedded store and on the faststream-compatible Redis layout.
func TestPublishAndDeliveryLinked(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(testing.TB) ontimedriver.Driver{"embedded": openBolt, "redis-compat": openCompat} {
		// The compatible layout keeps no attempt counter: every attempt
		// is 1 there.
		countsAttempts := name != "redis-compat"
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := newTraced(t, open(t))
			w := ontime.NewWorker(tr.client, &ontime.WorkerConfig{Logger: quiet})
			var mu sync.Mutex
			var headers []map[string]string
			var handlerParents []trace.SpanContext
			err := ontime.Handle(w, "jobs", func(ctx context.Context, m *ontime.Message[string]) error {
				_, child := tr.tp.Tracer("handler").Start(ctx, "handler work")
				child.End()
				mu.Lock()
				headers = append(headers, m.Headers)
				handlerParents = append(handlerParents, trace.SpanContextFromContext(ctx))
				first := len(headers) == 1
				mu.Unlock()
				if first {
					return errors.New("flaky")
				}
				return nil
			}, &ontime.TopicOptions{Retry: ontime.RetryPolicy{MinDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}

			ctx, caller := tr.tp.Tracer("test").Start(context.Background(), "caller")
			if _, err := tr.client.Publish(ctx, "jobs", "x", ontime.WithID("t1"), ontime.In(20*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			caller.End()
			run(t, w)

			pub := waitSpans(t, tr, "send", "jobs", 1)[0]
			if pub.SpanKind != trace.SpanKindProducer || pub.Parent.SpanID() != caller.SpanContext().SpanID() {
				t.Errorf("publish span: kind %v, parent %v; want a producer span under the caller's", pub.SpanKind, pub.Parent.SpanID())
			}
			if got := attr(pub, "messaging.destination.name").AsString(); got != "jobs" {
				t.Errorf("publish span topic %q", got)
			}
			if got := attr(pub, "messaging.message.id").AsString(); got != "t1" {
				t.Errorf("publish span id %q", got)
			}
			procs := waitSpans(t, tr, "process", "jobs", 2)
			for i, p := range procs {
				if p.SpanKind != trace.SpanKindConsumer {
					t.Errorf("delivery %d: kind %v", i, p.SpanKind)
				}
				if p.Parent.IsValid() || p.SpanContext.TraceID() == pub.SpanContext.TraceID() {
					t.Errorf("delivery %d: parent %v, trace %v; want the root of a trace of its own", i, p.Parent, p.SpanContext.TraceID())
				}
				if len(p.Links) != 1 || !p.Links[0].SpanContext.Equal(pub.SpanContext.WithRemote(true)) {
					t.Errorf("delivery %d: links %+v, want one to the publish span %v", i, p.Links, pub.SpanContext)
				}
				if attr(p, "messaging.destination.name").AsString() != "jobs" || attr(p, "messaging.message.id").AsString() != "t1" {
					t.Errorf("delivery %d: attributes %v", i, p.Attributes)
				}
				want := int64(i + 1)
				if !countsAttempts {
					want = 1
				}
				if got := attr(p, ontimeotel.AttrAttempt).AsInt64(); got != want {
					t.Errorf("delivery %d: attempt %d, want %d", i, got, want)
				}
				if got := attr(p, ontimeotel.AttrLatenessMS); got.Type() != attribute.FLOAT64 || got.AsFloat64() < 0 {
					t.Errorf("delivery %d: lateness %v", i, got.String())
				}
			}
			if procs[0].Status.Code != codes.Error || attr(procs[0], ontimeotel.AttrOutcome).AsString() != "retried" {
				t.Errorf("first attempt: status %v, outcome %v; want an error, retried", procs[0].Status, attr(procs[0], ontimeotel.AttrOutcome).String())
			}
			if procs[1].Status.Code == codes.Error || attr(procs[1], ontimeotel.AttrOutcome).AsString() != "acked" {
				t.Errorf("second attempt: status %v, outcome %v; want acked", procs[1].Status, attr(procs[1], ontimeotel.AttrOutcome).String())
			}
			mu.Lock()
			defer mu.Unlock()
			for i, h := range headers {
				want := "00-" + pub.SpanContext.TraceID().String() + "-" + pub.SpanContext.SpanID().String() + "-01"
				if h["traceparent"] != want {
					t.Errorf("delivery %d: traceparent header %q, want %q", i, h["traceparent"], want)
				}
			}
			for _, child := range waitSpans(t, tr, "handler work", "", 2) {
				found := false
				for _, p := range procs {
					found = found || child.Parent.SpanID() == p.SpanContext.SpanID()
				}
				if !found {
					t.Errorf("a span the handler started has parent %v, not a delivery span", child.Parent.SpanID())
				}
			}
			if len(handlerParents) != 2 || handlerParents[0].SpanID() != procs[0].SpanContext.SpanID() {
				t.Errorf("handler contexts hold %v, want the delivery spans", handlerParents)
			}
		})
	}
}

// TestBatchAndFailure: a batch is one publish span carried by every timer;
// a publish that fails ends its span with an error; a delivery of a timer
// whose headers carry no trace context has no link.
func TestBatchAndFailure(t *testing.T) {
	t.Parallel()
	drv := openBolt(t)
	tr := newTraced(t, drv)
	ctx := context.Background()
	res, err := tr.client.PublishBatch(ctx, "jobs", []ontime.Timer{{ID: "a", Delay: time.Hour}, {ID: "b", Delay: time.Hour, Headers: map[string]string{"k": "v"}}})
	if err != nil {
		t.Fatal(err)
	}
	pub := tr.spans("send", "jobs")
	if len(pub) != 1 || attr(pub[0], "messaging.batch.message_count").AsInt64() != 2 || pub[0].Parent.IsValid() {
		t.Fatalf("batch publish spans %+v", pub)
	}
	for _, r := range res {
		info, err := tr.client.Get(ctx, "jobs", r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := "00-" + pub[0].SpanContext.TraceID().String() + "-" + pub[0].SpanContext.SpanID().String() + "-01"; info.Headers["traceparent"] != want {
			t.Errorf("%s: traceparent %q, want %q", r.ID, info.Headers["traceparent"], want)
		}
		if r.ID == "b" && info.Headers["k"] != "v" {
			t.Errorf("b lost its own header: %v", info.Headers)
		}
	}

	if _, err := tr.client.Publish(ctx, "jobs", "x", ontime.In(-time.Second)); err == nil {
		t.Fatal("a negative delay was accepted")
	}
	if pub = tr.spans("send", "jobs"); len(pub) != 2 || pub[1].Status.Code != codes.Error {
		t.Errorf("failed publish span: %+v", pub)
	}

	// A timer written by someone without tracing.
	plain, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Publish(ctx, "plain", "x"); err != nil {
		t.Fatal(err)
	}
	w := ontime.NewWorker(tr.client, &ontime.WorkerConfig{Logger: quiet})
	if err := ontime.Handle(w, "plain", func(context.Context, *ontime.Message[string]) error { return ontime.DeadLetter(errors.New("poison")) }, nil); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	p := waitSpans(t, tr, "process", "plain", 1)[0]
	if len(p.Links) != 0 || p.Status.Code != codes.Error || attr(p, ontimeotel.AttrDeadReason).AsString() != "rejected" {
		t.Errorf("untraced delivery: links %v, status %v, attrs %v", p.Links, p.Status, p.Attributes)
	}
}

// TestPropagator: a custom propagator decides the headers (here W3C trace
// context and baggage, and the baggage reaches the handler's context).
func TestPropagator(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	h := ontimeotel.New(ontimeotel.WithTracerProvider(tp), ontimeotel.WithPropagator(prop))
	ev := &ontime.PublishEvent{Topic: "t", Timers: []ontime.Timer{{ID: "a"}}}
	ctx := prop.Extract(context.Background(), propagation.MapCarrier{"baggage": "tenant=42"})
	ctx = h.BeforePublish(ctx, ev)
	h.AfterPublish(ctx, ev)
	hdr := ev.Timers[0].Headers
	if hdr["traceparent"] == "" || hdr["baggage"] != "tenant=42" {
		t.Fatalf("headers %v", hdr)
	}
	d := &ontime.Delivery{Topic: "t", ID: "a", Attempt: 1, Headers: hdr}
	dctx := h.DeliveryStart(context.Background(), d)
	if got := prop.Fields(); len(got) != 3 {
		t.Errorf("fields %v", got)
	}
	carrier := propagation.MapCarrier{}
	propagation.Baggage{}.Inject(dctx, carrier)
	if carrier["baggage"] != "tenant=42" {
		t.Errorf("handler context baggage %q", carrier["baggage"])
	}
	h.DeliveryEnd(dctx, d, ontime.DeliveryResult{Outcome: ontime.OutcomeAcked})
	if n := len(exp.GetSpans()); n != 2 {
		t.Errorf("%d spans, want 2", n)
	}
}

// TestSpanNames: span names follow the OpenTelemetry messaging conventions
// with a low cardinality: the operation alone ("send", "process"), the
// topic in messaging.destination.name, however many topics there are (one
// per tenant here). A destination template, when the application gives
// one, completes the name ("send tenant-{id}") and is the
// messaging.destination.template attribute.
func TestSpanNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		opts     []ontimeotel.Option
		send     string
		process  string
		template string
	}{
		{name: "default", send: "send", process: "process"},
		{name: "template", opts: []ontimeotel.Option{ontimeotel.WithDestinationTemplate(func(topic string) string {
			if strings.HasPrefix(topic, "tenant-") {
				return "tenant-{id}"
			}
			return ""
		})}, send: "send tenant-{id}", process: "process tenant-{id}", template: "tenant-{id}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			defer tp.Shutdown(context.Background())
			h := ontimeotel.New(append([]ontimeotel.Option{ontimeotel.WithTracerProvider(tp)}, tc.opts...)...)
			for _, topic := range []string{"tenant-1", "tenant-2", "tenant-3"} {
				ev := &ontime.PublishEvent{Topic: topic, Timers: []ontime.Timer{{ID: "a"}}}
				h.AfterPublish(h.BeforePublish(context.Background(), ev), ev)
				d := &ontime.Delivery{Topic: topic, ID: "a", Attempt: 1, Headers: ev.Timers[0].Headers}
				h.DeliveryEnd(h.DeliveryStart(context.Background(), d), d, ontime.DeliveryResult{Outcome: ontime.OutcomeAcked})
			}
			spans := exp.GetSpans()
			if len(spans) != 6 {
				t.Fatalf("%d spans, want 6", len(spans))
			}
			for i, s := range spans {
				topic := fmt.Sprintf("tenant-%d", i/2+1)
				want := tc.send
				if s.SpanKind == trace.SpanKindConsumer {
					want = tc.process
				}
				if s.Name != want {
					t.Errorf("span %d of %s named %q, want %q", i, topic, s.Name, want)
				}
				if got := attr(s, "messaging.destination.name").AsString(); got != topic {
					t.Errorf("span %q: messaging.destination.name %q, want %q", s.Name, got, topic)
				}
				if got := attr(s, "messaging.destination.template").AsString(); got != tc.template {
					t.Errorf("span %q: messaging.destination.template %q, want %q", s.Name, got, tc.template)
				}
			}
		})
	}
}
