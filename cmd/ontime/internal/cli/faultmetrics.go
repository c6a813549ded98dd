package cli

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontime-go/ontime/ontimedriver"
)

// maxFaultLabels bounds the topic labels of ontime_store_topic_unavailable.
const maxFaultLabels = 100

// topicFaultsCollector exports the topics the store cannot serve now
// (ontimedriver.TopicFaults: a Redis Cluster master down until its replica
// is promoted): ontime_store_unavailable_topics counts them, and
// ontime_store_topic_unavailable{topic} is 1 for each (the first
// maxFaultLabels by name), absent otherwise.
type topicFaultsCollector struct {
	tf           ontimedriver.TopicFaults
	count, topic *prometheus.Desc
}

// registerTopicFaults registers the collector; with a store whose driver
// does not report topic faults (the embedded store) the count is always 0,
// so that dashboards and alerts have the series on every store.
func registerTopicFaults(reg prometheus.Registerer, d ontimedriver.Driver) error {
	tf, _ := ontimedriver.As[ontimedriver.TopicFaults](d)
	return reg.Register(&topicFaultsCollector{
		tf: tf,
		count: prometheus.NewDesc("ontime_store_unavailable_topics",
			"Topics whose store calls fail although the store answers (a Redis Cluster master down until its replica is promoted).", nil, nil),
		topic: prometheus.NewDesc("ontime_store_topic_unavailable",
			"1 for each topic whose store calls fail now (at most 100 topics by name).", []string{"topic"}, nil),
	})
}

// Describe implements prometheus.Collector.
func (c *topicFaultsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.topic
}

// Collect implements prometheus.Collector.
func (c *topicFaultsCollector) Collect(ch chan<- prometheus.Metric) {
	var faults []ontimedriver.TopicFault
	if c.tf != nil {
		faults = c.tf.UnavailableTopics()
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(len(faults)))
	for i, f := range faults {
		if i == maxFaultLabels {
			break
		}
		ch <- prometheus.MustNewConstMetric(c.topic, prometheus.GaugeValue, 1, f.Topic)
	}
}
