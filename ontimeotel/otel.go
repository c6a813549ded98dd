package ontimeotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ontime-go/ontime"
)

// ScopeName is the instrumentation scope of the tracer the hooks use.
const ScopeName = "github.com/ontime-go/ontime/ontimeotel"

// Attribute keys of the spans, besides the messaging.* ones of the
// OpenTelemetry semantic conventions.
const (
	// AttrAttempt is the delivery's attempt, 1 on the first.
	AttrAttempt = attribute.Key("ontime.attempt")
	// AttrLatenessMS is how late the delivery started, in milliseconds
	// (the store's clock at claim minus the due instant).
	AttrLatenessMS = attribute.Key("ontime.lateness_ms")
	// AttrDue is the timer's due instant, RFC 3339 with nanoseconds.
	AttrDue = attribute.Key("ontime.due")
	// AttrOutcome is the delivery's outcome (ontime.Outcome.String).
	AttrOutcome = attribute.Key("ontime.outcome")
	// AttrDelayMS is, for a retried or snoozed delivery, how long until
	// the timer is due again, in milliseconds.
	AttrDelayMS = attribute.Key("ontime.delay_ms")
	// AttrDeadReason is the dead-letter reason of a dead-lettered
	// delivery.
	AttrDeadReason = attribute.Key("ontime.dead_letter_reason")
)

// Semantic-convention keys (messaging spans).
const (
	keySystem         = attribute.Key("messaging.system")
	keyDestination    = attribute.Key("messaging.destination.name")
	keyTemplate       = attribute.Key("messaging.destination.template")
	keyOperationType  = attribute.Key("messaging.operation.type")
	keyOperationName  = attribute.Key("messaging.operation.name")
	keyMessageID      = attribute.Key("messaging.message.id")
	keyConversationID = attribute.Key("messaging.message.conversation_id")
	keyBatchCount     = attribute.Key("messaging.batch.message_count")
)

// Option configures New.
type Option func(*Hooks)

// WithTracerProvider sets the TracerProvider the spans come from. Default
// the global one (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(h *Hooks) { h.tp = tp }
}

// WithPropagator sets how the trace context is written into the timers'
// headers and read back. Default W3C Trace Context (propagation.TraceContext:
// the traceparent and tracestate headers), whatever the global propagator
// is; pass otel.GetTextMapPropagator() to use the global one (to carry
// baggage too, say).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(h *Hooks) { h.prop = p }
}

// WithDestinationTemplate gives the low-cardinality name of a topic's
// family, its "destination template" in the OpenTelemetry messaging
// conventions: for example "tenant-{id}" for the topics "tenant-1",
// "tenant-2", .... The spans of a topic with a template are named
// "send <template>" and "process <template>" and carry it as
// messaging.destination.template; template returns "" for a topic that has
// none. For an application whose topics are a small fixed set, pass a
// function that returns the topic itself.
//
// Without it (the default) the span names are the operation alone, "send"
// and "process": topics are often made per tenant or per entity, and a
// span name must not grow with them. The topic is always the
// messaging.destination.name attribute.
func WithDestinationTemplate(template func(topic string) string) Option {
	return func(h *Hooks) { h.template = template }
}

// Hooks traces publishes and deliveries with OpenTelemetry. Put it in
// ontime.Config.Hooks: it implements [ontime.BeforePublishHook],
// [ontime.AfterPublishHook], [ontime.DeliveryStartHook] and
// [ontime.DeliveryEndHook].
//
//   - Each Publish or PublishBatch call is a span of kind producer, "send",
//     child of the caller's span, and its trace context is
//     written into every timer's headers (W3C traceparent and tracestate),
//     which every store keeps with the message, the faststream-compatible
//     Redis layout included.
//   - Each delivery (each attempt) is a span of kind consumer, "process",
//     the root of a trace of its own, with a link (not a parent:
//     the timer may fire days later) to the publish span whose context
//     the timer's headers carry. The handler's context holds it, so spans
//     the handler starts are its children. Its attributes are the topic,
//     the id, the attempt, the lateness and, at its end, the outcome; a
//     failed attempt is marked as an error.
//
// Span names follow the OpenTelemetry messaging conventions with a low
// cardinality: the operation, then the topic's destination template if
// [WithDestinationTemplate] gives one ("send tenant-{id}"); the topic
// itself is the messaging.destination.name attribute.
//
// Hooks is safe for concurrent use.
type Hooks struct {
	tp       trace.TracerProvider
	prop     propagation.TextMapPropagator
	template func(topic string) string
	tracer   trace.Tracer
}

// spanKey is the context key of a span these hooks started, per Hooks.
type spanKey struct{ h *Hooks }

// New returns tracing hooks.
func New(opts ...Option) *Hooks {
	h := &Hooks{}
	for _, o := range opts {
		o(h)
	}
	if h.tp == nil {
		h.tp = otel.GetTracerProvider()
	}
	if h.prop == nil {
		h.prop = propagation.TraceContext{}
	}
	h.tracer = h.tp.Tracer(ScopeName)
	return h
}

// BeforePublish starts the publish span and writes its context into every
// timer's headers.
func (h *Hooks) BeforePublish(ctx context.Context, p *ontime.PublishEvent) context.Context {
	attrs := []attribute.KeyValue{
		keySystem.String("ontime"),
		keyDestination.String(p.Topic),
		keyOperationType.String("send"),
		keyOperationName.String("send"),
	}
	if len(p.Timers) == 1 {
		attrs = append(attrs, keyMessageID.String(p.Timers[0].ID))
	} else {
		attrs = append(attrs, keyBatchCount.Int(len(p.Timers)))
	}
	name, attrs := h.spanName("send", p.Topic, attrs)
	ctx, span := h.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	for i := range p.Timers {
		if p.Timers[i].Headers == nil {
			p.Timers[i].Headers = make(map[string]string, 2)
		}
		h.prop.Inject(ctx, propagation.MapCarrier(p.Timers[i].Headers))
	}
	return context.WithValue(ctx, spanKey{h}, span)
}

// spanName names the span of an operation on topic: the operation, and
// the topic's destination template if it has one (added to attrs).
func (h *Hooks) spanName(operation, topic string, attrs []attribute.KeyValue) (string, []attribute.KeyValue) {
	if h.template == nil {
		return operation, attrs
	}
	t := h.template(topic)
	if t == "" {
		return operation, attrs
	}
	return operation + " " + t, append(attrs, keyTemplate.String(t))
}

// AfterPublish ends the publish span, marked as an error if the call
// failed.
func (h *Hooks) AfterPublish(ctx context.Context, p *ontime.PublishEvent) {
	span, ok := ctx.Value(spanKey{h}).(trace.Span)
	if !ok {
		return
	}
	if p.Err != nil {
		span.RecordError(p.Err)
		span.SetStatus(codes.Error, p.Err.Error())
	}
	span.End()
}

// DeliveryStart starts the delivery's span, linked to the publish span
// that the timer's headers name, and returns the handler's context with
// it.
func (h *Hooks) DeliveryStart(ctx context.Context, d *ontime.Delivery) context.Context {
	// Extract puts what the headers carry into ctx (baggage, with a
	// propagator that carries it); the publisher's span becomes a link,
	// never the parent.
	ctx = h.prop.Extract(ctx, propagation.MapCarrier(d.Headers))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithNewRoot(),
		trace.WithAttributes(
			keySystem.String("ontime"),
			keyDestination.String(d.Topic),
			keyOperationType.String("process"),
			keyOperationName.String("process"),
			keyMessageID.String(d.ID),
			AttrAttempt.Int(d.Attempt),
			AttrLatenessMS.Float64(float64(d.FiredAt.Sub(d.Due))/float64(time.Millisecond)),
			AttrDue.String(d.Due.UTC().Format(time.RFC3339Nano)),
		),
	}
	if d.CorrelationID != "" && d.CorrelationID != d.ID {
		opts = append(opts, trace.WithAttributes(keyConversationID.String(d.CorrelationID)))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && sc.IsRemote() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	name, attrs := h.spanName("process", d.Topic, nil)
	opts = append(opts, trace.WithAttributes(attrs...))
	ctx, span := h.tracer.Start(ctx, name, opts...)
	return context.WithValue(ctx, spanKey{h}, span)
}

// DeliveryEnd ends the delivery's span with its outcome; an attempt that
// failed (retried, dropped, dead-lettered, lease lost) is an error.
func (h *Hooks) DeliveryEnd(ctx context.Context, d *ontime.Delivery, r ontime.DeliveryResult) {
	span, ok := ctx.Value(spanKey{h}).(trace.Span)
	if !ok {
		return
	}
	span.SetAttributes(AttrOutcome.String(r.Outcome.String()))
	if r.Outcome == ontime.OutcomeRetried || r.Outcome == ontime.OutcomeSnoozed {
		span.SetAttributes(AttrDelayMS.Float64(float64(r.Delay) / float64(time.Millisecond)))
	}
	if r.Outcome == ontime.OutcomeDeadLettered {
		span.SetAttributes(AttrDeadReason.String(r.Reason))
	}
	switch r.Outcome {
	case ontime.OutcomeAcked, ontime.OutcomeSnoozed, ontime.OutcomeReleased:
		if r.Err != nil {
			span.RecordError(r.Err)
		}
	default:
		if r.Err != nil {
			span.RecordError(r.Err)
			span.SetStatus(codes.Error, r.Err.Error())
		} else {
			span.SetStatus(codes.Error, r.Outcome.String())
		}
	}
	span.End()
}

// Interface checks.
var (
	_ ontime.BeforePublishHook = (*Hooks)(nil)
	_ ontime.AfterPublishHook  = (*Hooks)(nil)
	_ ontime.DeliveryStartHook = (*Hooks)(nil)
	_ ontime.DeliveryEndHook   = (*Hooks)(nil)
)
