package ontimeprom_test

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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/ontimeprom"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

func openBolt(t testing.TB) *ontimebolt.Driver {
	t.Helper()
	d, err := ontimebolt.Open(filepath.Join(t.TempDir(), "timers.db"), &ontimebolt.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// value returns the value of the series name{labels} in reg: a counter's
// or gauge's value, a histogram's sample count; -1 when there is none.
func value(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if len(got) != len(want) {
				continue
			}
			for k, v := range want {
				if got[k] != v {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

// TestEveryOutcome drives a real worker on the embedded store through
// every outcome a delivery can have and checks every counter and
// histogram, then the sampled timer counts, the worker gauges and a store
// error.
func TestEveryOutcome(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := ontimeprom.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	drv := openBolt(t)
	log := &endLog{}
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet, Hooks: []any{m, log}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var snoozed sync.Map
	w := ontime.NewWorker(client, &ontime.WorkerConfig{Logger: quiet})
	err = ontime.Handle(w, "jobs", func(ctx context.Context, msg *ontime.Message[string]) error {
		switch msg.ID {
		case "ack":
			time.Sleep(2 * time.Millisecond)
			return nil
		case "retry":
			if msg.Attempt == 1 {
				return errors.New("flaky")
			}
			return nil
		case "snooze":
			if _, again := snoozed.LoadOrStore(msg.ID, true); !again {
				return ontime.Snooze(10 * time.Millisecond)
			}
			return nil
		case "reject":
			return ontime.Drop(errors.New("no"))
		case "dead":
			return ontime.DeadLetter(errors.New("poison"))
		case "max":
			return errors.New("always")
		case "lost":
			if msg.Body == "x" {
				// Re-publishing the id takes the timer away from this
				// delivery: its lease is lost.
				if _, err := client.Publish(ctx, "jobs", "y", ontime.WithID(msg.ID), ontime.In(time.Hour)); err != nil {
					return err
				}
			}
			<-ctx.Done()
			return ctx.Err()
		case "stopped":
			<-ctx.Done() // released by a Stop that runs out of time
			return ctx.Err()
		}
		return errors.New("unexpected id " + msg.ID)
	}, &ontime.TopicOptions{
		MaxConcurrency: 16,
		Lease:          2 * time.Second, // long enough for a loaded machine; "lost" loses it at the first extension
		Retry:          ontime.RetryPolicy{MinDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxAttempts: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	unwatch := m.WatchWorker(w)
	defer unwatch()
	for _, id := range []string{"ack", "retry", "snooze", "reject", "dead", "max", "lost"} {
		if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID(id)); err != nil {
			t.Fatal(err)
		}
	}
	// IfAbsent finding the id is not a failure; a negative delay is.
	if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID("ack"), ontime.IfAbsent()); !errors.Is(err, ontime.ErrExists) {
		t.Fatalf("IfAbsent: %v", err)
	}
	if _, err := client.Publish(ctx, "jobs", "x", ontime.In(-time.Second)); !errors.Is(err, ontime.ErrInvalid) {
		t.Fatalf("negative delay: %v", err)
	}
	// A stored message that does not decode is dead-lettered unhandled.
	if _, err := drv.Schedule(ctx, "jobs", []ontimedriver.NewTimer{{ID: "bad", Payload: []byte("not an envelope")}}, ontimedriver.Upsert); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	deliveries := func(outcome string) float64 {
		return value(t, reg, "ontime_deliveries_total", "topic", "jobs", "outcome", outcome)
	}
	counts := func() string {
		var b strings.Builder
		for _, o := range []string{"acked", "retried", "snoozed", "dropped", "dead_lettered", "lease_lost", "released"} {
			fmt.Fprintf(&b, "%s=%v ", o, deliveries(o))
		}
		return b.String()
	}
	wait.For(t, 10*time.Second, func() bool {
		return deliveries("acked") == 3 && deliveries("retried") == 2 && deliveries("snoozed") == 1 &&
			deliveries("dropped") == 1 && deliveries("dead_lettered") == 3 && deliveries("lease_lost") == 1
	}, "every outcome but released: %s\nlog:\n%s", counts, log.String)
	// Published last, so that it holds its lease only for a moment.
	if _, err := client.Publish(ctx, "jobs", "x", ontime.WithID("stopped")); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, func() bool { return value(t, reg, "ontime_deliveries_in_flight", "topic", "jobs") == 1 }, "'stopped' in flight")
	if got := value(t, reg, "ontime_workers"); got != 1 {
		t.Errorf("ontime_workers = %v, want 1", got)
	}
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := w.Stop(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop: %v, want it to run out of time", err)
	}
	<-done

	expected := `
# HELP ontime_deliveries_total Deliveries ended, by outcome: acked, retried, snoozed, dropped, dead_lettered, lease_lost, released.
# TYPE ontime_deliveries_total counter
ontime_deliveries_total{outcome="acked",topic="jobs"} 3
ontime_deliveries_total{outcome="dead_lettered",topic="jobs"} 3
ontime_deliveries_total{outcome="dropped",topic="jobs"} 1
ontime_deliveries_total{outcome="lease_lost",topic="jobs"} 1
ontime_deliveries_total{outcome="released",topic="jobs"} 1
ontime_deliveries_total{outcome="retried",topic="jobs"} 2
ontime_deliveries_total{outcome="snoozed",topic="jobs"} 1
# HELP ontime_dead_letters_total Timers moved to the dead letters, by reason: max_attempts, rejected (the handler returned DeadLetter), undecodable, other.
# TYPE ontime_dead_letters_total counter
ontime_dead_letters_total{reason="max_attempts",topic="jobs"} 1
ontime_dead_letters_total{reason="other",topic="jobs"} 0
ontime_dead_letters_total{reason="rejected",topic="jobs"} 1
ontime_dead_letters_total{reason="undecodable",topic="jobs"} 1
# HELP ontime_fired_total Deliveries started: timers claimed by a worker and handed to the handler.
# TYPE ontime_fired_total counter
ontime_fired_total{topic="jobs"} 12
# HELP ontime_fired_early_total Deliveries that started before the timer's due instant, by the store's clock. Must stay 0.
# TYPE ontime_fired_early_total counter
ontime_fired_early_total{topic="jobs"} 0
# HELP ontime_published_total Timers written by Publish and PublishBatch.
# TYPE ontime_published_total counter
ontime_published_total{topic="jobs"} 9
# HELP ontime_publish_failed_total Timers Publish and PublishBatch did not write because of an error (not counting IfAbsent finding the id).
# TYPE ontime_publish_failed_total counter
ontime_publish_failed_total{topic="jobs"} 1
# HELP ontime_deliveries_in_flight Deliveries started and not ended yet.
# TYPE ontime_deliveries_in_flight gauge
ontime_deliveries_in_flight{topic="jobs"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"ontime_deliveries_total", "ontime_dead_letters_total", "ontime_fired_total", "ontime_fired_early_total",
		"ontime_published_total", "ontime_publish_failed_total", "ontime_deliveries_in_flight"); err != nil {
		t.Error(err)
	}
	// Every fired timer has a lateness; every handler run a duration (the
	// undecodable one ran no handler).
	if got := value(t, reg, "ontime_lateness_seconds", "topic", "jobs"); got != 12 {
		t.Errorf("lateness samples = %v, want 12", got)
	}
	if got := value(t, reg, "ontime_handler_duration_seconds", "topic", "jobs"); got != 11 {
		t.Errorf("handler duration samples = %v, want 11", got)
	}
	// Store calls are timed by op, and none failed so far.
	for _, op := range []string{"schedule", "claim", "settle", "subscribe"} {
		if got := value(t, reg, "ontime_store_call_duration_seconds", "op", op); got < 1 {
			t.Errorf("store call duration samples of %s = %v, want some", op, got)
		}
		if got := value(t, reg, "ontime_store_call_errors_total", "op", op); got != 0 {
			t.Errorf("store call errors of %s = %v, want 0", op, got)
		}
	}

	// The sampler: "lost" waits an hour, "stopped" was released, three
	// dead letters.
	if err := m.Sample(ctx, drv, nil); err != nil {
		t.Fatal(err)
	}
	for state, want := range map[string]float64{"scheduled": 2, "leased": 0, "dead": 3} {
		if got := value(t, reg, "ontime_timers", "topic", "jobs", "state", state); got != want {
			t.Errorf("ontime_timers{state=%q} = %v, want %v", state, got, want)
		}
	}
	if got := value(t, reg, "ontime_timers_sampled_timestamp_seconds"); got < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("sampled timestamp %v", got)
	}

	// A store that fails: its errors are counted by op, and so is a
	// failed pass of the sampler.
	if err := drv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Count(ctx, "jobs"); err == nil {
		t.Fatal("Count on a closed store succeeded")
	}
	if got := value(t, reg, "ontime_store_call_errors_total", "op", "count"); got != 1 {
		t.Errorf("store call errors of count = %v, want 1", got)
	}
	if err := m.Sample(ctx, drv, nil); err == nil {
		t.Error("Sample on a closed store succeeded")
	}
	if got := value(t, reg, "ontime_timers_sample_errors_total"); got != 1 {
		t.Errorf("sample errors = %v, want 1", got)
	}
	if got := value(t, reg, "ontime_timers", "topic", "jobs", "state", "dead"); got != 3 {
		t.Errorf("after a failed pass ontime_timers{dead} = %v, want the last good count 3", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// TestFiredEarly: a delivery whose store clock at claim is before its due
// instant is counted as fired early (and observed as 0 lateness).
func TestFiredEarly(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := ontimeprom.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now()
	m.DeliveryStart(context.Background(), &ontime.Delivery{Topic: "t", Due: due, FiredAt: due.Add(-time.Millisecond)})
	m.DeliveryStart(context.Background(), &ontime.Delivery{Topic: "t", Due: due, FiredAt: due.Add(3 * time.Millisecond)})
	if got := value(t, reg, "ontime_fired_early_total", "topic", "t"); got != 1 {
		t.Errorf("fired early = %v, want 1", got)
	}
	want := `
# HELP ontime_lateness_seconds How late deliveries start: the store's clock at claim minus the due instant.
# TYPE ontime_lateness_seconds histogram
ontime_lateness_seconds_bucket{topic="t",le="0.0005"} 1
ontime_lateness_seconds_bucket{topic="t",le="0.001"} 1
ontime_lateness_seconds_bucket{topic="t",le="0.0025"} 1
ontime_lateness_seconds_bucket{topic="t",le="0.005"} 2
ontime_lateness_seconds_bucket{topic="t",le="0.01"} 2
ontime_lateness_seconds_bucket{topic="t",le="0.025"} 2
ontime_lateness_seconds_bucket{topic="t",le="0.05"} 2
ontime_lateness_seconds_bucket{topic="t",le="0.1"} 2
ontime_lateness_seconds_bucket{topic="t",le="0.25"} 2
ontime_lateness_seconds_bucket{topic="t",le="0.5"} 2
ontime_lateness_seconds_bucket{topic="t",le="1"} 2
ontime_lateness_seconds_bucket{topic="t",le="2.5"} 2
ontime_lateness_seconds_bucket{topic="t",le="5"} 2
ontime_lateness_seconds_bucket{topic="t",le="10"} 2
ontime_lateness_seconds_bucket{topic="t",le="30"} 2
ontime_lateness_seconds_bucket{topic="t",le="60"} 2
ontime_lateness_seconds_bucket{topic="t",le="300"} 2
ontime_lateness_seconds_bucket{topic="t",le="+Inf"} 2
ontime_lateness_seconds_sum{topic="t"} 0.003
ontime_lateness_seconds_count{topic="t"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ontime_lateness_seconds"); err != nil {
		t.Error(err)
	}
}

// TestTopicCap: past MaxTopics, topics are counted under "(other)", a
// topic keeps the label it got, and TopicLabel groups and filters.
func TestTopicCap(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := ontimeprom.New(reg, &ontimeprom.Options{MaxTopics: 2})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(topic string) {
		m.AfterPublish(context.Background(), &ontime.PublishEvent{
			Topic: topic, Timers: []ontime.Timer{{ID: "x"}}, Results: []ontime.PublishResult{{ID: "x"}},
		})
	}
	for _, topic := range []string{"a", "b", "c", "d", "a"} {
		publish(topic)
	}
	for topic, want := range map[string]float64{"a": 2, "b": 1, ontimeprom.OtherTopic: 2, "c": -1} {
		if got := value(t, reg, "ontime_published_total", "topic", topic); got != want {
			t.Errorf("published{topic=%q} = %v, want %v", topic, got, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "ontime_published_total"); err != nil || n != 3 {
		t.Errorf("%d published series (%v), want 3", n, err)
	}

	reg2 := prometheus.NewRegistry()
	m2, err := ontimeprom.New(reg2, &ontimeprom.Options{TopicLabel: func(topic string) string {
		tenant, rest, ok := strings.Cut(topic, ":")
		if !ok || tenant == "" {
			return ""
		}
		return "tenant-*:" + rest // one label for every tenant's topic of that kind
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"t1:emails", "t2:emails", "t3:sms", "untenanted"} {
		m2.DeliveryStart(context.Background(), &ontime.Delivery{Topic: topic})
	}
	for topic, want := range map[string]float64{"tenant-*:emails": 2, "tenant-*:sms": 1, ontimeprom.OtherTopic: 1} {
		if got := value(t, reg2, "ontime_fired_total", "topic", topic); got != want {
			t.Errorf("fired{topic=%q} = %v, want %v", topic, got, want)
		}
	}

	allow := ontimeprom.AllowTopics("orders")
	if allow("orders") != "orders" || allow("other") != "" {
		t.Error("AllowTopics")
	}
}

// TestReservedTopics: the topics of Options.Topics have their labels from
// New on (every series at 0) and keep them after 5,000 other topics were
// published first; those others share MaxTopics labels and "(other)".
func TestReservedTopics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := ontimeprom.New(reg, &ontimeprom.Options{MaxTopics: 2, Topics: []string{"billing", "orders"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "ontime_published_total", "topic", "billing"); got != 0 {
		t.Errorf("billing before any event: %v, want a series at 0", got)
	}
	publish := func(topic string) {
		m.AfterPublish(context.Background(), &ontime.PublishEvent{
			Topic: topic, Timers: []ontime.Timer{{ID: "x"}}, Results: []ontime.PublishResult{{ID: "x"}},
		})
	}
	for i := range 5000 {
		publish(fmt.Sprintf("junk-%d", i))
	}
	publish("billing")
	m.DeliveryStart(context.Background(), &ontime.Delivery{Topic: "orders"})
	for topic, want := range map[string]float64{"billing": 1, "orders": 0, "junk-0": 1, "junk-1": 1, "junk-2": -1, ontimeprom.OtherTopic: 4998} {
		if got := value(t, reg, "ontime_published_total", "topic", topic); got != want {
			t.Errorf("published{topic=%q} = %v, want %v", topic, got, want)
		}
	}
	if got := value(t, reg, "ontime_fired_total", "topic", "orders"); got != 1 {
		t.Errorf("fired{topic=orders} = %v, want 1", got)
	}
}

// TestSamplerCap: the sampler sums the topics past the cap under
// "(other)", skips empty topics and can be limited to named topics.
func TestSamplerCap(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := ontimeprom.New(reg, &ontimeprom.Options{MaxTopics: 1})
	if err != nil {
		t.Fatal(err)
	}
	drv := openBolt(t)
	client, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for topic, n := range map[string]int{"a": 1, "b": 2, "c": 3} {
		for range n {
			if _, err := client.Publish(ctx, topic, "x", ontime.In(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Sample(ctx, drv, nil); err != nil {
		t.Fatal(err)
	}
	// Topics are listed sorted: "a" takes the one label.
	for topic, want := range map[string]float64{"a": 1, ontimeprom.OtherTopic: 5} {
		if got := value(t, reg, "ontime_timers", "topic", topic, "state", "scheduled"); got != want {
			t.Errorf("timers{topic=%q} = %v, want %v", topic, got, want)
		}
	}
	if got := value(t, reg, "ontime_timers_sampled_topics"); got != 3 {
		t.Errorf("sampled topics = %v", got)
	}
	if err := m.Sample(ctx, drv, &ontimeprom.SampleOptions{Filter: func(t string) bool { return t != "c" }}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "ontime_timers", "topic", ontimeprom.OtherTopic, "state", "scheduled"); got != 2 {
		t.Errorf("timers{(other)} with c filtered out = %v, want 2", got)
	}
	if err := m.Sample(ctx, drv, &ontimeprom.SampleOptions{Topics: []string{"a", "empty"}}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "ontime_timers", "topic", ontimeprom.OtherTopic, "state", "scheduled"); got != 0 {
		t.Errorf("timers{(other)} with topics a and empty = %v, want 0 (a named empty topic is reported)", got)
	}

	// RunSampler samples at once and stops with its context.
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	before := value(t, reg, "ontime_timers_sampled_timestamp_seconds")
	go func() { defer close(stopped); m.RunSampler(rctx, drv, &ontimeprom.SampleOptions{Interval: time.Hour}) }()
	wait.For(t, 10*time.Second, func() bool { return value(t, reg, "ontime_timers_sampled_timestamp_seconds") > before }, "a pass of RunSampler")
	cancel()
	<-stopped
}

// endLog records the deliveries' outcomes, for failure messages.
type endLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *endLog) DeliveryEnd(_ context.Context, d *ontime.Delivery, r ontime.DeliveryResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.b, "\n%s attempt %d: %s %v", d.ID, d.Attempt, r.Outcome, r.Err)
}

func (l *endLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type fakeWorker struct{ h ontime.Health }

func (f fakeWorker) Health() ontime.Health { return f.h }

// TestWorkerHealth: the worker gauges count the watched workers, the
// unhealthy and the degraded ones, read at each scrape.
func TestWorkerHealth(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := ontimeprom.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	u1 := m.WatchWorker(fakeWorker{ontime.Health{Healthy: true}})
	u2 := m.WatchWorker(fakeWorker{ontime.Health{Healthy: false}})
	u3 := m.WatchWorker(fakeWorker{ontime.Health{Healthy: true, Degraded: true}})
	check := func(workers, unhealthy, degraded float64) {
		t.Helper()
		for name, want := range map[string]float64{"ontime_workers": workers, "ontime_workers_unhealthy": unhealthy, "ontime_workers_degraded": degraded} {
			if got := value(t, reg, name); got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
	}
	check(3, 1, 1)
	u2()
	u2()
	check(2, 0, 1)
	u1()
	u3()
	check(0, 0, 0)
}

// TestRegistration: New needs a Registerer and refuses to register twice
// on one; a failed New leaves nothing registered.
func TestRegistration(t *testing.T) {
	t.Parallel()
	if _, err := ontimeprom.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	reg := prometheus.NewRegistry()
	if _, err := ontimeprom.New(reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ontimeprom.New(reg, nil); err == nil {
		t.Error("a second New on the same registry succeeded")
	}
	other := prometheus.NewRegistry()
	if err := other.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "ontime_workers", Help: "taken"})); err != nil {
		t.Fatal(err)
	}
	if _, err := ontimeprom.New(other, nil); err == nil {
		t.Error("New on a registry with a clashing name succeeded")
	}
	if n, err := testutil.GatherAndCount(other); err != nil || n != 1 {
		t.Errorf("after a failed New the registry holds %d series (%v), want only the one it had", n, err)
	}
}

// TestStoreOpsAndFailures: unknown ops count as "other"; definite answers
// and cancellations are not failures.
func TestStoreOpsAndFailures(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := ontimeprom.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, err := range []error{ontime.ErrNotFound, ontime.ErrExists, ontimedriver.ErrLeaseLost, ontime.ErrInvalid, context.Canceled} {
		m.StoreCall(ctx, ontime.StoreCall{Op: "get", Err: err})
	}
	m.StoreCall(ctx, ontime.StoreCall{Op: "get", Err: context.DeadlineExceeded})
	m.StoreCall(ctx, ontime.StoreCall{Op: "some_future_op", Err: errors.New("down"), Duration: time.Millisecond})
	if got := value(t, reg, "ontime_store_call_errors_total", "op", "get"); got != 1 {
		t.Errorf("get errors = %v, want 1 (the timeout)", got)
	}
	if got := value(t, reg, "ontime_store_call_errors_total", "op", "other"); got != 1 {
		t.Errorf("other errors = %v, want 1", got)
	}
	if got := value(t, reg, "ontime_store_call_duration_seconds", "op", "get"); got != 6 {
		t.Errorf("get durations = %v, want 6", got)
	}
}

// With SampleOptions.MaxTopics, a pass counts at most that many topics,
// those the hooks gave a label of their own first.
func TestSamplerMaxTopics(t *testing.T) {
	t.Parallel()
	reg, m, drv, plain, hooked := samplerClients(t)
	ctx := context.Background()
	for _, topic := range []string{"a", "b", "c"} {
		if _, err := plain.Publish(ctx, topic, "x", ontime.In(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	for _, topic := range []string{"y", "z"} {
		if _, err := hooked.Publish(ctx, topic, "x", ontime.In(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Sample(ctx, drv, &ontimeprom.SampleOptions{MaxTopics: 2}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "ontime_timers_sampled_topics"); got != 2 {
		t.Errorf("sampled topics = %v, want 2", got)
	}
	for _, topic := range []string{"y", "z"} {
		if got := value(t, reg, "ontime_timers", "topic", topic, "state", "scheduled"); got != 1 {
			t.Errorf("timers{topic=%q} = %v, want 1 (labelled topics are counted first)", topic, got)
		}
	}
	if err := m.Sample(ctx, drv, &ontimeprom.SampleOptions{MaxTopics: 3}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "ontime_timers", "topic", "a", "state", "scheduled"); got != 1 {
		t.Errorf("timers{topic=a} = %v, want 1 (then the others in name order)", got)
	}
}

// With SampleOptions.Labelled a pass counts the topics the hooks have
// seen, without listing the store's topics.
func TestSamplerLabelled(t *testing.T) {
	t.Parallel()
	reg, m, drv, plain, hooked := samplerClients(t)
	ctx := context.Background()
	for _, topic := range []string{"a", "b"} {
		if _, err := plain.Publish(ctx, topic, "x", ontime.In(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := hooked.Publish(ctx, "z", "x", ontime.In(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := m.Sample(ctx, drv, &ontimeprom.SampleOptions{Labelled: true}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "ontime_timers_sampled_topics"); got != 1 {
		t.Errorf("sampled topics = %v, want 1 (only z was seen by the hooks)", got)
	}
	if got := value(t, reg, "ontime_timers", "topic", "z", "state", "scheduled"); got != 1 {
		t.Errorf("timers{topic=z} = %v, want 1", got)
	}
}

// samplerClients returns Metrics on a registry, an embedded store and two
// Clients on it: plain (no hooks) and hooked (with the Metrics).
func samplerClients(t *testing.T) (*prometheus.Registry, *ontimeprom.Metrics, *ontimebolt.Driver, *ontime.Client, *ontime.Client) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := ontimeprom.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	drv := openBolt(t)
	plain, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hooked, err := ontime.NewClient(drv, &ontime.Config{Logger: quiet, Hooks: []any{m}})
	if err != nil {
		t.Fatal(err)
	}
	return reg, m, drv, plain, hooked
}
