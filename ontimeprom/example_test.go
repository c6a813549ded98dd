package ontimeprom_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/ontimeprom"
)

// exampleStore opens an embedded store in a temporary directory.
func exampleStore() (*ontimebolt.Driver, func()) {
	dir, err := os.MkdirTemp("", "ontimeprom-example-")
	if err != nil {
		log.Fatal(err)
	}
	drv, err := ontimebolt.Open(filepath.Join(dir, "timers.db"), &ontimebolt.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	return drv, func() { drv.Close(); os.RemoveAll(dir) }
}

// printSeries prints the series of reg named names, in the Prometheus
// text format, leaving out HELP and TYPE.
func printSeries(reg prometheus.Gatherer, names ...string) {
	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, n := range names {
			if mf.GetName() == n {
				if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
					log.Fatal(err)
				}
			}
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			fmt.Println(line)
		}
	}
}

// Metrics go into a Client's hooks; a worker's health and the timers in
// the store are added with WatchWorker and the sampler. A server would
// serve reg with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).
func Example() {
	drv, closeStore := exampleStore()
	defer closeStore()
	ctx := context.Background()

	reg := prometheus.NewRegistry()
	m, err := ontimeprom.New(reg, nil)
	if err != nil {
		log.Fatal(err)
	}
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet, Hooks: []any{m}})
	if err != nil {
		log.Fatal(err)
	}
	worker := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	defer m.WatchWorker(worker)()
	done := make(chan struct{})
	ontime.Handle(worker, "emails", func(ctx context.Context, msg *ontime.Message[string]) error {
		close(done)
		return nil
	}, nil)
	client.Publish(ctx, "emails", "welcome", ontime.In(10*time.Millisecond))
	client.Publish(ctx, "emails", "reminder", ontime.In(time.Hour))
	go worker.Run(ctx)
	<-done
	worker.Stop(ctx)
	m.Sample(ctx, drv, nil) // RunSampler does this every 30 s
	printSeries(reg, "ontime_published_total", "ontime_fired_total", "ontime_fired_early_total",
		"ontime_deliveries_total", "ontime_timers", "ontime_workers", "ontime_workers_unhealthy")
	// Output:
	// ontime_deliveries_total{outcome="acked",topic="emails"} 1
	// ontime_deliveries_total{outcome="dead_lettered",topic="emails"} 0
	// ontime_deliveries_total{outcome="dropped",topic="emails"} 0
	// ontime_deliveries_total{outcome="lease_lost",topic="emails"} 0
	// ontime_deliveries_total{outcome="released",topic="emails"} 0
	// ontime_deliveries_total{outcome="retried",topic="emails"} 0
	// ontime_deliveries_total{outcome="snoozed",topic="emails"} 0
	// ontime_fired_early_total{topic="emails"} 0
	// ontime_fired_total{topic="emails"} 1
	// ontime_published_total{topic="emails"} 2
	// ontime_timers{state="dead",topic="emails"} 0
	// ontime_timers{state="leased",topic="emails"} 0
	// ontime_timers{state="scheduled",topic="emails"} 1
	// ontime_workers 1
	// ontime_workers_unhealthy 0
}

// A service with a topic per tenant keeps its series bounded by grouping
// topics into one label value per kind of topic (or by AllowTopics).
func ExampleOptions_topicLabel() {
	drv, closeStore := exampleStore()
	defer closeStore()
	ctx := context.Background()

	reg := prometheus.NewRegistry()
	m, err := ontimeprom.New(reg, &ontimeprom.Options{
		TopicLabel: func(topic string) string {
			// "tenant-42:invoices" → "invoices"; anything else → "(other)".
			if _, kind, ok := strings.Cut(topic, ":"); ok {
				return kind
			}
			return ""
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	client, _ := ontime.NewClient(drv, &ontime.Config{Logger: quiet, Hooks: []any{m}})
	for _, topic := range []string{"tenant-1:invoices", "tenant-2:invoices", "tenant-2:reminders", "audit"} {
		client.Publish(ctx, topic, "x", ontime.In(time.Hour))
	}
	printSeries(reg, "ontime_published_total")
	// Output:
	// ontime_published_total{topic="(other)"} 1
	// ontime_published_total{topic="invoices"} 2
	// ontime_published_total{topic="reminders"} 1
}
