package kafkadelayprom_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ontime-go/ontime/kafkadelay"
	"github.com/ontime-go/ontime/kafkadelay/kafkadelayprom"
)

// TestEveryEvent: each Observer event and the partitions' state land in
// their metrics; a bucket's counters exist at 0 once the bucket is seen.
func TestEveryEvent(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m, err := kafkadelayprom.NewMetrics(kafkadelayprom.Registerer(reg))
	if err != nil {
		t.Fatal(err)
	}
	b1, b5 := kafkadelay.Bucket{Delay: time.Second, Topic: "delay-1s"}, kafkadelay.Bucket{Delay: 5 * time.Second, Topic: "delay-5s"}
	m.Rebalanced(kafkadelay.Rebalance{Kind: "assigned", Partitions: map[string][]int32{"delay-1s": {0}, "delay-5s": {0}}})
	due := time.Now()
	m.Released(kafkadelay.Release{Source: "delay-1s", Due: due, Produced: due.Add(3 * time.Millisecond)})
	m.Released(kafkadelay.Release{Source: "delay-1s", Due: due, Produced: due.Add(-time.Millisecond), Early: true})
	m.Rerouted(b5, b1)
	m.ProduceFailed(kafkadelay.ProduceFailure{Source: "delay-5s", Attempt: 1, Err: errors.New("down")})
	m.DeadLettered(kafkadelay.DeadLetter{Source: "delay-5s", Reason: "malformed"})
	m.FetchFailed(kafkadelay.FetchFailure{Err: errors.New("unable to join group session")})
	m.FetchFailed(kafkadelay.FetchFailure{Topic: "delay-1s", Partition: 0, Err: errors.New("down")})
	m.Rebalanced(kafkadelay.Rebalance{Kind: "revoked", HandedOff: 3, Dropped: 2, Unacked: 1})
	m.WatchStats(func() []kafkadelay.PartitionStats {
		return []kafkadelay.PartitionStats{
			{Topic: "delay-1s", Partition: 0, Owned: true, Paused: true, HeadLate: 250 * time.Millisecond, Held: 4, Buffered: 5, Producing: 6},
			{Topic: "delay-5s", Partition: 0, Owned: false, Held: 99},
		}
	})
	want := `
# HELP ontime_kafka_dead_lettered_total Records produced to the dead-letter topic and acknowledged, by the bucket topic they were read from.
# TYPE ontime_kafka_dead_lettered_total counter
ontime_kafka_dead_lettered_total{bucket="delay-1s"} 0
ontime_kafka_dead_lettered_total{bucket="delay-5s"} 1
# HELP ontime_kafka_fetch_errors_total Errors returned by polls of the bucket topics (a partition's fetch, or the cluster or group unreachable).
# TYPE ontime_kafka_fetch_errors_total counter
ontime_kafka_fetch_errors_total 2
# HELP ontime_kafka_partition_head_late_seconds How far past its instant the partition's oldest unfinished record is (the lag that matters for a delay topic; 0 when nothing is overdue).
# TYPE ontime_kafka_partition_head_late_seconds gauge
ontime_kafka_partition_head_late_seconds{partition="0",topic="delay-1s"} 0.25
# HELP ontime_kafka_partition_held_records Records taken and waiting in memory for their instant.
# TYPE ontime_kafka_partition_held_records gauge
ontime_kafka_partition_held_records{partition="0",topic="delay-1s"} 4
# HELP ontime_kafka_partition_paused 1 while fetching from the partition is paused (its head is not due to move, a produce is retried, or MaxInFlight is reached).
# TYPE ontime_kafka_partition_paused gauge
ontime_kafka_partition_paused{partition="0",topic="delay-1s"} 1
# HELP ontime_kafka_partitions_owned Bucket partitions this republisher owns now.
# TYPE ontime_kafka_partitions_owned gauge
ontime_kafka_partitions_owned 1
# HELP ontime_kafka_produce_errors_total Failed produces (each failed retry counts), by the bucket topic the record was read from.
# TYPE ontime_kafka_produce_errors_total counter
ontime_kafka_produce_errors_total{bucket="delay-1s"} 0
ontime_kafka_produce_errors_total{bucket="delay-5s"} 1
# HELP ontime_kafka_rebalance_records_total Records affected by revocations and losses: handed_off (produced onward so offsets could be committed), dropped (read again by the next owner), unacked (may be duplicated).
# TYPE ontime_kafka_rebalance_records_total counter
ontime_kafka_rebalance_records_total{what="dropped"} 2
ontime_kafka_rebalance_records_total{what="handed_off"} 3
ontime_kafka_rebalance_records_total{what="unacked"} 1
# HELP ontime_kafka_rebalances_total Changes of the partitions this republisher owns, by kind: assigned, revoked, lost.
# TYPE ontime_kafka_rebalances_total counter
ontime_kafka_rebalances_total{kind="assigned"} 1
ontime_kafka_rebalances_total{kind="revoked"} 1
# HELP ontime_kafka_released_early_total Records produced to their destination before their due instant by the republisher's clock. Must stay 0.
# TYPE ontime_kafka_released_early_total counter
ontime_kafka_released_early_total{bucket="delay-1s"} 1
ontime_kafka_released_early_total{bucket="delay-5s"} 0
# HELP ontime_kafka_released_total Records produced to their destination and acknowledged, by the bucket topic they left.
# TYPE ontime_kafka_released_total counter
ontime_kafka_released_total{bucket="delay-1s"} 2
ontime_kafka_released_total{bucket="delay-5s"} 0
# HELP ontime_kafka_rerouted_total Records produced to the next bucket topic and acknowledged, by the bucket they left and the one they went to.
# TYPE ontime_kafka_rerouted_total counter
ontime_kafka_rerouted_total{from="delay-5s",to="delay-1s"} 1
`
	names := []string{"ontime_kafka_dead_lettered_total", "ontime_kafka_fetch_errors_total", "ontime_kafka_partition_head_late_seconds", "ontime_kafka_partition_held_records",
		"ontime_kafka_partition_paused", "ontime_kafka_partitions_owned", "ontime_kafka_produce_errors_total", "ontime_kafka_rebalance_records_total",
		"ontime_kafka_rebalances_total", "ontime_kafka_released_early_total", "ontime_kafka_released_total", "ontime_kafka_rerouted_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "ontime_kafka_release_lateness_seconds"); err != nil || n != 1 {
		t.Errorf("lateness series: %d %v", n, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	if _, err := kafkadelayprom.NewMetrics(kafkadelayprom.Registerer(reg)); err == nil {
		t.Error("a second New on the same registry succeeded")
	}
}

// Handler serves the metrics' own registry by default and the
// Registerer's when it gathers; a Registerer that cannot gather gets a 500
// that says so.
func TestHandler(t *testing.T) {
	t.Parallel()
	scrape := func(m *kafkadelayprom.Metrics) (int, string) {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Code, rec.Body.String()
	}
	own, err := kafkadelayprom.NewMetrics(kafkadelayprom.LatenessBuckets([]float64{1, 2}))
	if err != nil {
		t.Fatal(err)
	}
	own.Released(kafkadelay.Release{Source: "b", Due: time.Now(), Produced: time.Now()})
	if code, body := scrape(own); code != 200 || !strings.Contains(body, `ontime_kafka_release_lateness_seconds_bucket{bucket="b",le="2"} 1`) {
		t.Errorf("own registry: %d\n%s", code, body)
	}
	reg := prometheus.NewRegistry()
	shared, err := kafkadelayprom.NewMetrics(kafkadelayprom.Registerer(reg))
	if err != nil {
		t.Fatal(err)
	}
	shared.Rebalanced(kafkadelay.Rebalance{Kind: "lost"})
	if code, body := scrape(shared); code != 200 || !strings.Contains(body, `ontime_kafka_rebalances_total{kind="lost"} 1`) {
		t.Errorf("shared registry: %d\n%s", code, body)
	}
	wrapped, err := kafkadelayprom.NewMetrics(kafkadelayprom.Registerer(prometheus.WrapRegistererWithPrefix("x_", prometheus.NewRegistry())))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := scrape(wrapped); code != 500 || !strings.Contains(body, "not a Gatherer") {
		t.Errorf("registerer without gatherer: %d %q", code, body)
	}
}
