// Package ontimeprom exports what an ontime Client and its Workers do as
// Prometheus metrics: timers published, fired and settled per topic and
// outcome, how late they fire and how long handlers run (histograms), timers
// fired early (a counter that must stay 0), the timers in the store per
// topic and state (sampled at an interval, never per scrape), the duration
// and errors of store calls, and the health of workers.
//
// The metrics are registered on a [prometheus.Registerer] the caller gives
// (never the global registry unless the caller passes it), and fed by
// ontime's hooks, so the ontime module itself does not import Prometheus:
//
//	reg := prometheus.NewRegistry()
//	m, err := ontimeprom.New(reg, nil)
//	client, err := ontime.NewClient(drv, &ontime.Config{Hooks: []any{m}})
//	worker := ontime.NewWorker(client, nil)
//	defer m.WatchWorker(worker)()
//	go m.RunSampler(ctx, drv, nil)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// # Topic labels
//
// Most metrics have a topic label (the full topic, Client prefix included).
// A service may have thousands of topics, so the number of label values is
// capped: the first [Options].MaxTopics topics seen (default 100) get their
// own label and every later one is counted under [OtherTopic], "(other)".
// The topics a service names in [Options].Topics get their labels first,
// at [New], and keep them, whatever junk topics arrive before their first
// event.
// [Options].TopicLabel maps topics to groups, or with [AllowTopics] gives
// labels only to the topics named. Each label value costs about 60 series.
//
// docs/observability.md in the repository lists every metric, and
// docs/grafana-dashboard.json is a dashboard built on them.
package ontimeprom
