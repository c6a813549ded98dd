package ontimeprom

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver"
)

// OtherTopic is the topic label value of the topics that get no label of
// their own: those past Options.MaxTopics, and those Options.TopicLabel
// maps to "". It cannot be a topic name (topics have no parentheses).
const OtherTopic = "(other)"

// DefaultMaxTopics is the default of Options.MaxTopics.
const DefaultMaxTopics = 100

// Default bucket boundaries, in seconds.
var (
	// LatenessBuckets resolve a millisecond at the bottom (the target is
	// p99 ≤ 5 ms) and minutes at the top (an outage, a backlog).
	LatenessBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	// HandlerBuckets span a fast in-memory handler to a minute-long one.
	HandlerBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	// StoreBuckets span a loopback Redis round trip (~100 µs) to a store
	// call that times out.
	StoreBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
)

// Options configure New. The zero value (or nil) means the defaults.
type Options struct {
	// MaxTopics caps the number of distinct topic label values. A topic
	// first seen once the cap is reached is counted under [OtherTopic]
	// (for as long as the Metrics lives: a label never moves), and so is
	// every topic after it. Each topic label costs about 60 series (the
	// two histograms make most of them). Default [DefaultMaxTopics];
	// negative means no cap (only for a service whose topics are few
	// and known).
	MaxTopics int
	// Topics get their own label (their TopicLabel) from New on, before
	// any event, and keep it whatever other topics arrive: the topics a
	// service configures, which junk topics published first must not
	// push under [OtherTopic]. They do not count against MaxTopics.
	Topics []string
	// TopicLabel maps a full topic (Client prefix included) to its label
	// value, to group topics (one label per tenant group rather than per
	// tenant, say) or to allow only some (see [AllowTopics]). "" means
	// [OtherTopic]. It is called once per topic, and must return the same
	// value for the same topic. Default: the topic itself.
	TopicLabel func(topic string) string
	// LatenessBuckets, HandlerBuckets and StoreBuckets replace the
	// histograms' default buckets (the variables of the same names).
	LatenessBuckets, HandlerBuckets, StoreBuckets []float64
}

// AllowTopics returns an Options.TopicLabel that gives each of topics its
// own label and counts every other topic under [OtherTopic].
func AllowTopics(topics ...string) func(topic string) string {
	allowed := make(map[string]bool, len(topics))
	for _, t := range topics {
		allowed[t] = true
	}
	return func(topic string) string {
		if allowed[topic] {
			return topic
		}
		return ""
	}
}

// Metrics counts what a Client and its Workers do, in Prometheus metrics
// registered on the Registerer given to New. Put it in
// ontime.Config.Hooks: it implements [ontime.AfterPublishHook],
// [ontime.DeliveryStartHook], [ontime.DeliveryEndHook],
// [ontime.StoreCallHook] and [ontime.UnfiredTicksHook]. [Metrics.WatchWorker] adds a worker's health,
// [Metrics.RunSampler] the number of timers per topic and state. One
// Metrics may serve several Clients. docs/observability.md lists every
// metric.
//
// Its methods are safe for concurrent use.
type Metrics struct {
	maxTopics int
	reserved  int // the labels of Options.Topics, handed out by New
	labelFn   func(string) string

	published, publishFailed, fired, early *prometheus.CounterVec
	deliveries, deadLetters                *prometheus.CounterVec
	lateness, handler                      *prometheus.HistogramVec
	storeDur                               *prometheus.HistogramVec
	storeErr                               *prometheus.CounterVec
	ticks                                  *prometheus.CounterVec

	// topics maps a topic to its metrics (a *topicEntry); several
	// topics share the OtherTopic one. cached counts its entries. last is
	// the topic looked up last: a worker's events come in runs of one
	// topic, and comparing a string is cheaper than hashing it.
	topics sync.Map
	cached atomic.Int64
	last   atomic.Pointer[topicEntry]
	// mu guards labels, the label values handed out.
	mu     sync.Mutex
	labels map[string]*topicMetrics

	stores map[string]*storeMetrics // by op, built once

	sampled  *sampledCollector
	workers  *workerCollector
	sampling sampleStats
}

// topicMetrics are one topic label's metrics.
type topicMetrics struct {
	published, publishFailed, fired, early prometheus.Counter
	outcomes                               [int(ontime.OutcomeReleased) + 1]prometheus.Counter
	dead                                   map[string]prometheus.Counter // by reason
	lateness, handler                      prometheus.Observer
	// ticks of recurring timers, by tickOutcomes
	ticks [3]prometheus.Counter
	// inFlight is exported by the inFlight collector: an integer add is
	// cheaper than a Gauge's compare-and-swap loop on a float.
	inFlight atomic.Int64
}

type topicEntry struct {
	topic string
	tm    *topicMetrics
}

type storeMetrics struct {
	dur prometheus.Observer
	err prometheus.Counter
}

// outcomes in the order of ontime's Outcome values.
var outcomes = []ontime.Outcome{
	ontime.OutcomeAcked, ontime.OutcomeRetried, ontime.OutcomeSnoozed, ontime.OutcomeDropped,
	ontime.OutcomeDeadLettered, ontime.OutcomeLeaseLost, ontime.OutcomeReleased,
}

// deadReasons are the dead-letter reasons the worker reports; any other is
// counted as "other".
var deadReasons = []string{ontimedriver.ReasonMaxAttempts, ontimedriver.ReasonRejected, ontimedriver.ReasonUndecodable, "other"}

// tickOutcomes are the outcome label values of recurring_ticks_total.
var tickOutcomes = [3]string{"fired", "missed", "skipped"}

const (
	tickFired = iota
	tickMissed
	tickSkipped
)

// storeOps are the ops of ontime.StoreCall; any other is counted as
// "other".
var storeOps = []string{
	"schedule", "claim", "settle", "extend", "cancel", "get", "list", "count", "topics",
	"list_dead", "replay_dead", "replay_all_dead", "purge_dead", "purge_all_dead", "count_due", "fire_now", "due_topics", "subscribe", "ping",
	"schedule_recurring", "pause_recurring", "resume_recurring", "other",
}

// maxCached bounds the topic → metrics cache; topics past it are looked up
// under the lock each time (a service with more distinct topics than this
// pays a little more per event, and nothing grows).
const maxCached = 1 << 16

// New builds the metrics and registers them on reg (never the global
// registry unless that is what reg is). It fails if reg refuses one of
// them, for instance because another Metrics registered there already.
func New(reg prometheus.Registerer, opts *Options) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("ontimeprom: New: the Registerer is nil")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxTopics == 0 {
		o.MaxTopics = DefaultMaxTopics
	}
	if o.LatenessBuckets == nil {
		o.LatenessBuckets = LatenessBuckets
	}
	if o.HandlerBuckets == nil {
		o.HandlerBuckets = HandlerBuckets
	}
	if o.StoreBuckets == nil {
		o.StoreBuckets = StoreBuckets
	}
	topic := []string{"topic"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ontime", Name: name, Help: help}, labels)
	}
	m := &Metrics{
		maxTopics: o.MaxTopics,
		labelFn:   o.TopicLabel,
		labels:    map[string]*topicMetrics{},
		stores:    map[string]*storeMetrics{},

		published:     counter("published_total", "Timers written by Publish and PublishBatch.", topic...),
		publishFailed: counter("publish_failed_total", "Timers Publish and PublishBatch did not write because of an error (not counting IfAbsent finding the id).", topic...),
		fired:         counter("fired_total", "Deliveries started: timers claimed by a worker and handed to the handler.", topic...),
		early:         counter("fired_early_total", "Deliveries that started before the timer's due instant, by the store's clock. Must stay 0.", topic...),
		deliveries:    counter("deliveries_total", "Deliveries ended, by outcome: acked, retried, snoozed, dropped, dead_lettered, lease_lost, released.", "topic", "outcome"),
		deadLetters:   counter("dead_letters_total", "Timers moved to the dead letters, by reason: max_attempts, rejected (the handler returned DeadLetter), undecodable, other.", "topic", "reason"),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ontime", Name: "lateness_seconds", Buckets: o.LatenessBuckets,
			Help: "How late deliveries start: the store's clock at claim minus the due instant.",
		}, topic),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ontime", Name: "handler_duration_seconds", Buckets: o.HandlerBuckets,
			Help: "How long the middleware and the handler ran, per delivery.",
		}, topic),
		storeDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ontime", Name: "store_call_duration_seconds", Buckets: o.StoreBuckets,
			Help: "Duration of the calls to the store, by op.",
		}, []string{"op"}),
		ticks:    counter("recurring_ticks_total", "Ticks of recurring timers, by outcome: fired (delivered, and ended: acked, dropped or dead-lettered), missed (passed while no tick could run, not fired by the missed-ticks policy), skipped (passed while the schedule was paused).", "topic", "outcome"),
		storeErr: counter("store_call_errors_total", "Store calls that failed (unreachable, timed out, closed), by op; definite answers (not found, exists, lease lost, invalid) and cancelled calls are not counted.", "op"),
	}
	m.sampled = &sampledCollector{m: m}
	m.workers = &workerCollector{workers: map[*workerEntry]struct{}{}}
	for _, op := range storeOps {
		m.stores[op] = &storeMetrics{dur: m.storeDur.WithLabelValues(op), err: m.storeErr.WithLabelValues(op)}
	}
	cs := []prometheus.Collector{
		m.published, m.publishFailed, m.fired, m.early, m.deliveries, m.deadLetters, (*inFlight)(m),
		m.lateness, m.handler, m.storeDur, m.storeErr, m.ticks, m.sampled, m.workers,
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, r := range cs[:i] {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("ontimeprom: registering the metrics: %w", err)
		}
	}
	m.reserve(o.Topics)
	return m, nil
}

// labelLocked returns the label value of a full topic: its own (new or
// already handed out) if TopicLabel and the cap allow, else OtherTopic;
// m.mu is held.
func (m *Metrics) labelLocked(topic string) string {
	l := topic
	if m.labelFn != nil {
		l = m.labelFn(topic)
	}
	if l == "" || l == OtherTopic {
		return OtherTopic
	}
	if _, ok := m.labels[l]; ok {
		return l
	}
	if m.maxTopics > 0 && len(m.labels)-m.reserved >= m.maxTopics {
		return OtherTopic
	}
	return l
}

// reserve hands out the labels of Options.Topics.
func (m *Metrics) reserve(topics []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, topic := range topics {
		l := topic
		if m.labelFn != nil {
			l = m.labelFn(topic)
		}
		if l == "" || l == OtherTopic {
			continue
		}
		if _, ok := m.labels[l]; !ok {
			m.labels[l] = m.newTopic(l)
			m.reserved++
		}
	}
}

// topic returns the metrics of a full topic.
func (m *Metrics) topic(topic string) *topicMetrics {
	if e := m.last.Load(); e != nil && e.topic == topic {
		return e.tm
	}
	if e, ok := m.topics.Load(topic); ok {
		e := e.(*topicEntry)
		m.last.Store(e)
		return e.tm
	}
	m.mu.Lock()
	l := m.labelLocked(topic)
	tm := m.labels[l]
	if tm == nil {
		tm = m.newTopic(l)
		m.labels[l] = tm
	}
	m.mu.Unlock()
	if m.cached.Load() < maxCached {
		if _, loaded := m.topics.LoadOrStore(topic, &topicEntry{topic, tm}); !loaded {
			m.cached.Add(1)
		}
	}
	return tm
}

// newTopic creates every series of a label value, so that they all read 0
// from the start (rates and dashboards need no "absent" special case).
func (m *Metrics) newTopic(l string) *topicMetrics {
	tm := &topicMetrics{
		published:     m.published.WithLabelValues(l),
		publishFailed: m.publishFailed.WithLabelValues(l),
		fired:         m.fired.WithLabelValues(l),
		early:         m.early.WithLabelValues(l),
		lateness:      m.lateness.WithLabelValues(l),
		handler:       m.handler.WithLabelValues(l),
		dead:          make(map[string]prometheus.Counter, len(deadReasons)),
	}
	for _, o := range outcomes {
		tm.outcomes[o] = m.deliveries.WithLabelValues(l, o.String())
	}
	for _, r := range deadReasons {
		tm.dead[r] = m.deadLetters.WithLabelValues(l, r)
	}
	for i, o := range tickOutcomes {
		tm.ticks[i] = m.ticks.WithLabelValues(l, o)
	}
	return tm
}

// labelOf returns a full topic's label value, for the sampler, creating
// its series as the event path would.
func (m *Metrics) labelOf(topic string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.labelLocked(topic)
	if _, ok := m.labels[l]; !ok {
		m.labels[l] = m.newTopic(l)
	}
	return l
}

// AfterPublish counts the timers a Publish or PublishBatch call wrote, and
// those it failed to write.
func (m *Metrics) AfterPublish(_ context.Context, p *ontime.PublishEvent) {
	tm := m.topic(p.Topic)
	var written, exists int
	for i := range p.Results {
		switch err := p.Results[i].Err; {
		case err == nil:
			written++
		case errors.Is(err, ontime.ErrExists):
			exists++
		}
	}
	if written > 0 {
		tm.published.Add(float64(written))
	}
	if failed := len(p.Timers) - written - exists; failed > 0 {
		tm.publishFailed.Add(float64(failed))
	}
}

// DeliveryStart counts a fired timer and its lateness (and a timer fired
// early, which must never happen).
func (m *Metrics) DeliveryStart(ctx context.Context, d *ontime.Delivery) context.Context {
	tm := m.topic(d.Topic)
	tm.fired.Inc()
	tm.inFlight.Add(1)
	late := d.FiredAt.Sub(d.Due)
	if late < 0 {
		tm.early.Inc()
		late = 0
	}
	tm.lateness.Observe(late.Seconds())
	return ctx
}

// DeliveryEnd counts a delivery's outcome and the handler's duration.
func (m *Metrics) DeliveryEnd(_ context.Context, d *ontime.Delivery, r ontime.DeliveryResult) {
	tm := m.topic(d.Topic)
	tm.inFlight.Add(-1)
	if r.Outcome >= ontime.OutcomeAcked && r.Outcome <= ontime.OutcomeReleased {
		tm.outcomes[r.Outcome].Inc()
	}
	if r.Outcome == ontime.OutcomeDeadLettered {
		c, ok := tm.dead[r.Reason]
		if !ok {
			c = tm.dead["other"]
		}
		c.Inc()
	}
	if d.Tick.N > 0 {
		switch r.Outcome {
		case ontime.OutcomeAcked, ontime.OutcomeDropped, ontime.OutcomeDeadLettered:
			// The tick ended (its retries, if any, are behind it) and
			// armed the next one.
			tm.ticks[tickFired].Inc()
		}
	}
	if r.Duration > 0 || r.Reason != ontimedriver.ReasonUndecodable {
		// Every delivery whose handler ran (an undecodable one has none).
		tm.handler.Observe(r.Duration.Seconds())
	}
}

// UnfiredTicks counts the ticks of a recurring timer that passed without
// firing: missed, or skipped while it was paused.
func (m *Metrics) UnfiredTicks(_ context.Context, u *ontime.UnfiredTicks) {
	i := tickMissed
	if u.Paused {
		i = tickSkipped
	}
	m.topic(u.Topic).ticks[i].Add(float64(u.Count))
}

// StoreCall times a store call and counts it if it failed.
func (m *Metrics) StoreCall(_ context.Context, c ontime.StoreCall) {
	sm, ok := m.stores[c.Op]
	if !ok {
		sm = m.stores["other"]
	}
	sm.dur.Observe(c.Duration.Seconds())
	if c.Err != nil && isFailure(c.Err) {
		sm.err.Inc()
	}
}

// isFailure tells a store failure from one of its definite answers.
func isFailure(err error) bool {
	switch {
	case errors.Is(err, ontimedriver.ErrNotFound), errors.Is(err, ontimedriver.ErrExists),
		errors.Is(err, ontimedriver.ErrLeaseLost), errors.Is(err, ontimedriver.ErrInvalid),
		errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// inFlight exports each topic label's deliveries in flight.
type inFlight Metrics

var inFlightDesc = prometheus.NewDesc("ontime_deliveries_in_flight", "Deliveries started and not ended yet.", []string{"topic"}, nil)

// Describe implements prometheus.Collector.
func (c *inFlight) Describe(ch chan<- *prometheus.Desc) { ch <- inFlightDesc }

// Collect implements prometheus.Collector.
func (c *inFlight) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for l, tm := range c.labels {
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(tm.inFlight.Load()), l)
	}
}

// Interface checks.
var (
	_ ontime.AfterPublishHook  = (*Metrics)(nil)
	_ ontime.DeliveryStartHook = (*Metrics)(nil)
	_ ontime.DeliveryEndHook   = (*Metrics)(nil)
	_ ontime.StoreCallHook     = (*Metrics)(nil)
)

// sampleStats describe the sampler's last passes.
type sampleStats struct {
	mu       sync.Mutex
	last     time.Time // end of the last successful pass
	duration time.Duration
	errors   float64
	topics   int
}
