// Package kafkadelayprom exports a [kafkadelay.Republisher]'s events and
// per-partition state as Prometheus metrics, in the style of franz-go's
// plugin/kprom: create the metrics, pass them as the republisher's
// Observer, and let them read its partitions at each scrape.
//
//	m, err := kafkadelayprom.NewMetrics(kafkadelayprom.Registerer(reg))
//	rp, err := kafkadelay.NewRepublisher(kafkadelay.Config{..., Observer: m}, opts...)
//	m.Watch(rp)
//	http.Handle("/metrics", m.Handler()) // or your registry's handler
//
// It is its own module, so that neither kafkadelay's users get Prometheus
// nor ontimeprom's users get franz-go. The metric names are ontime's
// (ontime_kafka_*, below) and stable: docs/grafana-kafka-dashboard.json
// reads them. Labels are bounded by the ladder: bucket topics and their
// partitions, never destination topics or record keys.
//
// Counters, by the bucket topic a record was read from (label bucket):
// ontime_kafka_released_total, ontime_kafka_released_early_total (must stay
// 0), ontime_kafka_dead_lettered_total, ontime_kafka_produce_errors_total;
// ontime_kafka_fetch_errors_total (no label: errors of polls of the bucket
// topics, such as a cluster that cannot be reached);
// ontime_kafka_rerouted_total (labels from, to);
// ontime_kafka_rebalances_total (kind: assigned, revoked, lost);
// ontime_kafka_rebalance_records_total (what: handed_off, dropped,
// unacked). Histogram: ontime_kafka_release_lateness_seconds (bucket).
// Gauges, read from Republisher.Stats at each scrape:
// ontime_kafka_partitions_owned and, by topic and partition,
// ontime_kafka_partition_head_late_seconds, _held_records,
// _buffered_records, _producing_records and _paused.
package kafkadelayprom

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ontime-go/ontime/kafkadelay"
)

// DefaultLatenessBuckets are the release lateness histogram's buckets, in
// seconds: from half a millisecond (a release on time) to five minutes (a
// republisher that was down). They are ontimeprom's LatenessBuckets.
var DefaultLatenessBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Opt configures [NewMetrics].
type Opt interface{ apply(*cfg) }

type cfg struct {
	reg      prometheus.Registerer
	gatherer prometheus.Gatherer
	buckets  []float64
}

type opt func(*cfg)

func (o opt) apply(c *cfg) { o(c) }

// Registerer registers the metrics on reg instead of on a new registry of
// their own. When reg is also a [prometheus.Gatherer] (a
// *prometheus.Registry is), [Metrics.Handler] serves it.
func Registerer(reg prometheus.Registerer) Opt {
	return opt(func(c *cfg) {
		c.reg = reg
		c.gatherer, _ = reg.(prometheus.Gatherer)
	})
}

// LatenessBuckets sets the buckets (seconds) of
// ontime_kafka_release_lateness_seconds. Default [DefaultLatenessBuckets].
func LatenessBuckets(b []float64) Opt {
	return opt(func(c *cfg) { c.buckets = b })
}

// Metrics is a [kafkadelay.Observer] that counts a republisher's events,
// and a collector of its partitions' state once [Metrics.Watch] is
// called. It is safe for concurrent use.
type Metrics struct {
	kafkadelay.BaseObserver

	gatherer prometheus.Gatherer

	released, dead, produceErrors, early *prometheus.CounterVec
	rerouted                             *prometheus.CounterVec
	lateness                             *prometheus.HistogramVec
	rebalances, rebalanceRecords         *prometheus.CounterVec
	fetchErrors                          prometheus.Counter

	mu    sync.Mutex
	stats func() []kafkadelay.PartitionStats
}

var _ kafkadelay.Observer = (*Metrics)(nil)

// NewMetrics builds the metrics and registers them (on a new registry of
// their own unless [Registerer] says where). It fails if the registerer
// already has them (it then unregisters those it registered).
func NewMetrics(opts ...Opt) (*Metrics, error) {
	c := cfg{buckets: DefaultLatenessBuckets}
	for _, o := range opts {
		o.apply(&c)
	}
	if c.reg == nil {
		r := prometheus.NewRegistry()
		c.reg, c.gatherer = r, r
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "ontime", Subsystem: "kafka", Name: name, Help: help}, labels)
	}
	m := &Metrics{
		gatherer:      c.gatherer,
		released:      counter("released_total", "Records produced to their destination and acknowledged, by the bucket topic they left.", "bucket"),
		rerouted:      counter("rerouted_total", "Records produced to the next bucket topic and acknowledged, by the bucket they left and the one they went to.", "from", "to"),
		dead:          counter("dead_lettered_total", "Records produced to the dead-letter topic and acknowledged, by the bucket topic they were read from.", "bucket"),
		produceErrors: counter("produce_errors_total", "Failed produces (each failed retry counts), by the bucket topic the record was read from.", "bucket"),
		early:         counter("released_early_total", "Records produced to their destination before their due instant by the republisher's clock. Must stay 0.", "bucket"),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ontime", Subsystem: "kafka", Name: "release_lateness_seconds", Buckets: c.buckets,
			Help: "How long after its due instant each record was handed to the producer for its destination.",
		}, []string{"bucket"}),
		rebalances: counter("rebalances_total", "Changes of the partitions this republisher owns, by kind: assigned, revoked, lost.", "kind"),
		fetchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ontime", Subsystem: "kafka", Name: "fetch_errors_total",
			Help: "Errors returned by polls of the bucket topics (a partition's fetch, or the cluster or group unreachable).",
		}),
		rebalanceRecords: counter("rebalance_records_total", "Records affected by revocations and losses: handed_off (produced onward so offsets could be committed), dropped (read again by the next owner), unacked (may be duplicated).", "what"),
	}
	cs := []prometheus.Collector{m.released, m.rerouted, m.dead, m.produceErrors, m.early, m.lateness, m.rebalances, m.rebalanceRecords, m.fetchErrors, (*partitions)(m)}
	for i, col := range cs {
		if err := c.reg.Register(col); err != nil {
			for _, r := range cs[:i] {
				c.reg.Unregister(r)
			}
			return nil, err
		}
	}
	return m, nil
}

// Handler serves the registry the metrics are on in Prometheus's text
// format: their own registry, or the one given to [Registerer] when it is
// a Gatherer. With a Registerer that cannot gather, it answers 500: serve
// your registry yourself.
func (m *Metrics) Handler() http.Handler {
	if m.gatherer == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "kafkadelayprom: the Registerer given to NewMetrics is not a Gatherer; serve it yourself", http.StatusInternalServerError)
		})
	}
	return promhttp.HandlerFor(m.gatherer, promhttp.HandlerOpts{})
}

// Watch makes the per-partition gauges report r's partitions (read at
// each scrape from r.Stats, which takes the republisher's lock briefly).
func (m *Metrics) Watch(r *kafkadelay.Republisher) { m.WatchStats(r.Stats) }

// WatchStats makes the per-partition gauges report what stats returns at
// each scrape.
func (m *Metrics) WatchStats(stats func() []kafkadelay.PartitionStats) {
	m.mu.Lock()
	m.stats = stats
	m.mu.Unlock()
}

// bucket creates a bucket's series of every per-bucket counter, so that
// they read 0 rather than being absent (released early must be seen at 0).
func (m *Metrics) bucket(topic string) {
	for _, c := range []*prometheus.CounterVec{m.released, m.dead, m.produceErrors, m.early} {
		c.WithLabelValues(topic)
	}
}

// Released counts a release and its lateness.
func (m *Metrics) Released(r kafkadelay.Release) {
	m.bucket(r.Source)
	m.released.WithLabelValues(r.Source).Inc()
	if r.Early {
		m.early.WithLabelValues(r.Source).Inc()
	}
	m.lateness.WithLabelValues(r.Source).Observe(max(r.Lateness(), 0).Seconds())
}

// Rerouted counts a record moved to the next bucket.
func (m *Metrics) Rerouted(from, to kafkadelay.Bucket) {
	m.bucket(from.Topic)
	m.rerouted.WithLabelValues(from.Topic, to.Topic).Inc()
}

// ProduceFailed counts a failed produce.
func (m *Metrics) ProduceFailed(f kafkadelay.ProduceFailure) {
	m.bucket(f.Source)
	m.produceErrors.WithLabelValues(f.Source).Inc()
}

// FetchFailed counts an error a poll returned.
func (m *Metrics) FetchFailed(kafkadelay.FetchFailure) { m.fetchErrors.Inc() }

// DeadLettered counts a dead letter.
func (m *Metrics) DeadLettered(d kafkadelay.DeadLetter) {
	m.bucket(d.Source)
	m.dead.WithLabelValues(d.Source).Inc()
}

// Rebalanced counts a rebalance and the records it touched.
func (m *Metrics) Rebalanced(r kafkadelay.Rebalance) {
	m.rebalances.WithLabelValues(r.Kind).Inc()
	for topic := range r.Partitions {
		m.bucket(topic)
	}
	m.rebalanceRecords.WithLabelValues("handed_off").Add(float64(r.HandedOff))
	m.rebalanceRecords.WithLabelValues("dropped").Add(float64(r.Dropped))
	m.rebalanceRecords.WithLabelValues("unacked").Add(float64(r.Unacked))
}

// partitions collects the per-partition gauges from Republisher.Stats.
type partitions Metrics

var (
	ownedDesc     = prometheus.NewDesc("ontime_kafka_partitions_owned", "Bucket partitions this republisher owns now.", nil, nil)
	headLateDesc  = prometheus.NewDesc("ontime_kafka_partition_head_late_seconds", "How far past its instant the partition's oldest unfinished record is (the lag that matters for a delay topic; 0 when nothing is overdue).", []string{"topic", "partition"}, nil)
	heldDesc      = prometheus.NewDesc("ontime_kafka_partition_held_records", "Records taken and waiting in memory for their instant.", []string{"topic", "partition"}, nil)
	bufferedDesc  = prometheus.NewDesc("ontime_kafka_partition_buffered_records", "Records fetched and not taken yet (the head is not due to move).", []string{"topic", "partition"}, nil)
	producingDesc = prometheus.NewDesc("ontime_kafka_partition_producing_records", "Produces not acknowledged yet.", []string{"topic", "partition"}, nil)
	pausedDesc    = prometheus.NewDesc("ontime_kafka_partition_paused", "1 while fetching from the partition is paused (its head is not due to move, a produce is retried, or MaxInFlight is reached).", []string{"topic", "partition"}, nil)
)

// Describe implements prometheus.Collector.
func (p *partitions) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ownedDesc, headLateDesc, heldDesc, bufferedDesc, producingDesc, pausedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the partitions owned now.
func (p *partitions) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	stats := p.stats
	p.mu.Unlock()
	var owned float64
	if stats != nil {
		for _, s := range stats() {
			if !s.Owned {
				continue
			}
			owned++
			part := strconv.Itoa(int(s.Partition))
			paused := 0.0
			if s.Paused {
				paused = 1
			}
			ch <- prometheus.MustNewConstMetric(headLateDesc, prometheus.GaugeValue, s.HeadLate.Seconds(), s.Topic, part)
			ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(s.Held), s.Topic, part)
			ch <- prometheus.MustNewConstMetric(bufferedDesc, prometheus.GaugeValue, float64(s.Buffered), s.Topic, part)
			ch <- prometheus.MustNewConstMetric(producingDesc, prometheus.GaugeValue, float64(s.Producing), s.Topic, part)
			ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, paused, s.Topic, part)
		}
	}
	ch <- prometheus.MustNewConstMetric(ownedDesc, prometheus.GaugeValue, owned)
}
