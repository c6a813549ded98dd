package ontimeotel_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/ontimeotel"
)

// Tracing hooks on a Client: the publish is a producer span whose context
// travels in the timer's traceparent header, and the delivery a consumer
// span of its own trace, linked to it. Here the spans go to the SDK's
// in-memory exporter; an application would use an OTLP exporter.
func Example() {
	dir, err := os.MkdirTemp("", "ontimeotel-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	drv, err := ontimebolt.Open(filepath.Join(dir, "timers.db"), &ontimebolt.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	ctx := context.Background()

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)
	tracing := ontimeotel.New(ontimeotel.WithTracerProvider(tp))
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet, Hooks: []any{tracing}})
	if err != nil {
		log.Fatal(err)
	}
	worker := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	done := make(chan struct{})
	ontime.Handle(worker, "emails", func(ctx context.Context, m *ontime.Message[string]) error {
		close(done)
		return nil
	}, nil)
	client.Publish(ctx, "emails", "welcome", ontime.WithID("e-1"), ontime.In(10*time.Millisecond))
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)

	spans := exp.GetSpans()
	publish := spans[0]
	for _, s := range spans {
		linked := len(s.Links) == 1 && s.Links[0].SpanContext.SpanID() == publish.SpanContext.SpanID()
		var topic string
		for _, a := range s.Attributes {
			if a.Key == "messaging.destination.name" {
				topic = a.Value.AsString()
			}
		}
		fmt.Printf("%s %s (%s): new trace %v, linked to the publish %v\n",
			s.Name, topic, s.SpanKind, s.SpanContext.TraceID() != publish.SpanContext.TraceID(), linked)
	}
	// Output:
	// send emails (producer): new trace false, linked to the publish false
	// process emails (consumer): new trace true, linked to the publish true
}

// Topics made per tenant keep the span names few: a destination template
// names their family, and the topic stays an attribute.
func ExampleWithDestinationTemplate() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tracing := ontimeotel.New(ontimeotel.WithTracerProvider(tp),
		ontimeotel.WithDestinationTemplate(func(topic string) string {
			if strings.HasPrefix(topic, "tenant-") {
				return "tenant-{id}"
			}
			return "" // no family: the span is named by its operation alone
		}))
	for _, topic := range []string{"tenant-7", "tenant-42", "audit"} {
		ev := &ontime.PublishEvent{Topic: topic, Timers: []ontime.Timer{{ID: "t1"}}}
		tracing.AfterPublish(tracing.BeforePublish(context.Background(), ev), ev)
	}
	for _, s := range exp.GetSpans() {
		fmt.Printf("%q", s.Name)
		for _, a := range s.Attributes {
			if a.Key == "messaging.destination.name" || a.Key == "messaging.destination.template" {
				fmt.Printf(" %s=%s", a.Key, a.Value.AsString())
			}
		}
		fmt.Println()
	}
	// Output:
	// "send tenant-{id}" messaging.destination.name=tenant-7 messaging.destination.template=tenant-{id}
	// "send tenant-{id}" messaging.destination.name=tenant-42 messaging.destination.template=tenant-{id}
	// "send" messaging.destination.name=audit
}
