package ontimeprom

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
)

// DefaultSampleInterval is the default of SampleOptions.Interval.
const DefaultSampleInterval = 30 * time.Second

// SampleOptions configure the sampling of the timers per topic and state.
// The zero value (or nil) means the defaults.
type SampleOptions struct {
	// Interval is the time between the starts of two passes of
	// RunSampler. Default [DefaultSampleInterval].
	Interval time.Duration
	// Timeout bounds one pass. Default Interval.
	Timeout time.Duration
	// Topics are the full topics to count. Default: every topic the store
	// lists (Driver.Topics: a set read on Redis's native layout; a SCAN of
	// the keyspace on the faststream-compatible layout, which is why it
	// runs at an interval and never per scrape: name the topics here to
	// avoid it).
	Topics []string
	// Filter, if set, keeps only the listed topics it returns true for
	// (for instance those under a Client's prefix).
	Filter func(topic string) bool
	// MaxTopics, if positive, bounds the topics counted per pass: those
	// that have a topic label of their own (seen by the hooks) first,
	// then the others in name order. With thousands of topics a count of
	// each would cost the store more than the metrics are worth; the
	// ontime_timers gauges then cover only the counted topics (see
	// ontime_timers_sample_topics). Default 0: every topic.
	MaxTopics int
	// Labelled counts the topics that have a topic label of their own
	// (seen by the hooks since the Metrics were made: a publish, a
	// delivery) instead of listing the store's topics, so a pass costs
	// nothing per topic the process has not touched (a store with
	// 100,000 topics: the list alone is 100,000 entries per pass).
	// Ignored when Topics is set, and with Options.TopicLabel (labels
	// are then not topic names).
	Labelled bool
}

// sampledCollector exports the last pass of the sampler.
type sampledCollector struct {
	m *Metrics

	mu     sync.Mutex
	counts map[string]ontimedriver.Counts // by topic label
}

var (
	timersDesc = prometheus.NewDesc("ontime_timers",
		"Timers in the store by topic and state (scheduled, leased, dead), counted by the sampler every interval.",
		[]string{"topic", "state"}, nil)
	sampledAtDesc = prometheus.NewDesc("ontime_timers_sampled_timestamp_seconds",
		"Unix time at which the last successful pass of the sampler ended (0 before the first).", nil, nil)
	sampleDurDesc = prometheus.NewDesc("ontime_timers_sample_duration_seconds",
		"How long the last successful pass of the sampler took.", nil, nil)
	sampleErrDesc = prometheus.NewDesc("ontime_timers_sample_errors_total",
		"Passes of the sampler that failed (the last good counts stay exported).", nil, nil)
	sampleTopicsDesc = prometheus.NewDesc("ontime_timers_sampled_topics",
		"Topics counted by the last successful pass of the sampler.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *sampledCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- timersDesc
	ch <- sampledAtDesc
	ch <- sampleDurDesc
	ch <- sampleErrDesc
	ch <- sampleTopicsDesc
}

// Collect implements prometheus.Collector: it sends the numbers of the last
// pass, and never touches the store.
func (c *sampledCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	for l, n := range c.counts {
		ch <- prometheus.MustNewConstMetric(timersDesc, prometheus.GaugeValue, float64(n.Scheduled), l, "scheduled")
		ch <- prometheus.MustNewConstMetric(timersDesc, prometheus.GaugeValue, float64(n.Leased), l, "leased")
		ch <- prometheus.MustNewConstMetric(timersDesc, prometheus.GaugeValue, float64(n.Dead), l, "dead")
	}
	c.mu.Unlock()
	s := &c.m.sampling
	s.mu.Lock()
	defer s.mu.Unlock()
	var at float64
	if !s.last.IsZero() {
		at = float64(s.last.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(sampledAtDesc, prometheus.GaugeValue, at)
	ch <- prometheus.MustNewConstMetric(sampleDurDesc, prometheus.GaugeValue, s.duration.Seconds())
	ch <- prometheus.MustNewConstMetric(sampleErrDesc, prometheus.CounterValue, s.errors)
	ch <- prometheus.MustNewConstMetric(sampleTopicsDesc, prometheus.GaugeValue, float64(s.topics))
}

// Sample counts the timers of every topic once (Driver.Count per topic,
// one store round trip each) and makes the counts what the ontime_timers
// gauges report, summed by topic label. Topics that hold no timer and no
// dead letter are not reported. On an error the previous counts stay and
// ontime_timers_sample_errors_total goes up. Pass the store the Client
// uses (Client.Driver()): the sampler's own calls are not counted in the
// store call metrics. RunSampler calls Sample at an interval.
func (m *Metrics) Sample(ctx context.Context, d ontimedriver.Driver, opts *SampleOptions) error {
	o := sampleDefaults(opts)
	start := time.Now()
	err := m.sample(ctx, d, o)
	s := &m.sampling
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errors++
		return err
	}
	s.last = time.Now()
	s.duration = s.last.Sub(start)
	return nil
}

func sampleDefaults(opts *SampleOptions) SampleOptions {
	var o SampleOptions
	if opts != nil {
		o = *opts
	}
	if o.Interval <= 0 {
		o.Interval = DefaultSampleInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = o.Interval
	}
	return o
}

func (m *Metrics) sample(ctx context.Context, d ontimedriver.Driver, o SampleOptions) error {
	if d == nil {
		return errors.New("ontimeprom: Sample: the driver is nil")
	}
	topics := o.Topics
	labelled := len(topics) == 0 && o.Labelled && m.labelFn == nil
	if labelled {
		topics = m.ownLabels()
	} else if len(topics) == 0 {
		var err error
		if topics, err = d.Topics(ctx); err != nil {
			return fmt.Errorf("ontimeprom: sampling: listing topics: %w", err)
		}
	}
	if o.Filter != nil {
		kept := make([]string, 0, len(topics))
		for _, t := range topics {
			if o.Filter(t) {
				kept = append(kept, t)
			}
		}
		topics = kept
	}
	if o.MaxTopics > 0 && len(topics) > o.MaxTopics {
		topics = m.firstLabelled(topics, o.MaxTopics)
	}
	counts := map[string]ontimedriver.Counts{}
	n := 0
	for _, t := range topics {
		c, err := d.Count(ctx, t)
		if err != nil {
			return fmt.Errorf("ontimeprom: sampling: counting %q: %w", t, err)
		}
		n++
		if c.Scheduled == 0 && c.Leased == 0 && c.Dead == 0 && len(o.Topics) == 0 {
			continue
		}
		l := m.labelOf(t)
		sum := counts[l]
		sum.Scheduled += c.Scheduled
		sum.Leased += c.Leased
		sum.Dead += c.Dead
		counts[l] = sum
	}
	m.sampled.mu.Lock()
	m.sampled.counts = counts
	m.sampled.mu.Unlock()
	m.sampling.mu.Lock()
	m.sampling.topics = n
	m.sampling.mu.Unlock()
	return nil
}

// ownLabels returns the topics that have a label of their own, sorted.
func (m *Metrics) ownLabels() []string {
	m.mu.Lock()
	out := make([]string, 0, len(m.labels))
	for l := range m.labels {
		if l != OtherTopic {
			out = append(out, l)
		}
	}
	m.mu.Unlock()
	slices.Sort(out)
	return out
}

// firstLabelled returns max of topics: those with a label of their own
// first, then the others, each group in the order given.
func (m *Metrics) firstLabelled(topics []string, max int) []string {
	out := make([]string, 0, max)
	var rest []string
	m.mu.Lock()
	for _, t := range topics {
		if _, own := m.labels[t]; own && len(out) < max {
			out = append(out, t)
		} else {
			rest = append(rest, t)
		}
	}
	m.mu.Unlock()
	for _, t := range rest {
		if len(out) == max {
			break
		}
		out = append(out, t)
	}
	return out
}

// RunSampler calls Sample at once and then every SampleOptions.Interval,
// until ctx ends; errors are counted in ontime_timers_sample_errors_total.
// Run it in its own goroutine: it returns when ctx ends.
func (m *Metrics) RunSampler(ctx context.Context, d ontimedriver.Driver, opts *SampleOptions) {
	o := sampleDefaults(opts)
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, o.Timeout)
		_ = m.Sample(pctx, d, &o)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// HealthReporter is what WatchWorker watches: *ontime.Worker implements
// it.
type HealthReporter interface {
	Health() ontime.Health
}

type workerEntry struct{ w HealthReporter }

// workerCollector reports the health of the watched workers at each
// scrape (Worker.Health reads memory: no store call).
type workerCollector struct {
	mu      sync.Mutex
	workers map[*workerEntry]struct{}
}

var (
	workersDesc = prometheus.NewDesc("ontime_workers",
		"Workers watched (WatchWorker).", nil, nil)
	unhealthyDesc = prometheus.NewDesc("ontime_workers_unhealthy",
		"Watched workers that cannot reach the store now (Worker.Health().Healthy is false).", nil, nil)
	degradedDesc = prometheus.NewDesc("ontime_workers_degraded",
		"Watched workers without wake-up notifications for some topic: they deliver by polling, up to a poll interval late.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *workerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- workersDesc
	ch <- unhealthyDesc
	ch <- degradedDesc
}

// Collect implements prometheus.Collector.
func (c *workerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	var n, unhealthy, degraded float64
	for e := range c.workers {
		h := e.w.Health()
		n++
		if !h.Healthy {
			unhealthy++
		}
		if h.Degraded {
			degraded++
		}
	}
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, n)
	ch <- prometheus.MustNewConstMetric(unhealthyDesc, prometheus.GaugeValue, unhealthy)
	ch <- prometheus.MustNewConstMetric(degradedDesc, prometheus.GaugeValue, degraded)
}

// WatchWorker adds w's health to the ontime_workers* gauges, read at each
// scrape, until the returned func is called (it is safe to call more than
// once).
func (m *Metrics) WatchWorker(w HealthReporter) (unwatch func()) {
	e := &workerEntry{w: w}
	c := m.workers
	c.mu.Lock()
	c.workers[e] = struct{}{}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.workers, e)
		c.mu.Unlock()
	}
}
