// Package ontimeotel traces ontime with OpenTelemetry: a publish is a
// producer span whose trace context travels in the timer's headers (W3C
// traceparent and tracestate), and each delivery is a consumer span, the
// root of its own trace, linked to that publish span, with the topic, id,
// attempt and lateness as attributes.
//
//	tracing := ontimeotel.New(ontimeotel.WithTracerProvider(tp))
//	client, err := ontime.NewClient(drv, &ontime.Config{Hooks: []any{tracing}})
//
// A link, not a parent: a timer may fire days after it was published, and
// a trace that spans days (with every retry in it) helps no one; the link
// takes a trace viewer from the delivery to its publish and back.
//
// The headers are ordinary user headers, so a publisher in another
// process or language (faststream, say, on the compatible Redis layout)
// that writes a traceparent header links its deliveries the same way.
//
// Span names follow the OpenTelemetry messaging conventions with a low
// cardinality: "send" and "process", the topic in the
// messaging.destination.name attribute (topics are often one per tenant,
// and a span name must not grow with them); [WithDestinationTemplate]
// names a topic's family ("send tenant-{id}").
//
// This module depends on the OpenTelemetry API only (go.opentelemetry.io/otel
// and otel/trace); the SDK is the application's choice.
package ontimeotel
