package kafkadelayprom_test

import (
	"bufio"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/ontime-go/ontime/kafkadelay"
	"github.com/ontime-go/ontime/kafkadelay/kafkadelayprom"
)

// The metrics are the republisher's Observer (Config.Observer) and read
// its partitions at each scrape (Watch). Here two events stand in for a
// running republisher, and the handler is scraped.
func Example() {
	m, err := kafkadelayprom.NewMetrics() // a registry of its own, served by Handler
	if err != nil {
		panic(err)
	}
	// With a republisher: kafkadelay.NewRepublisher(kafkadelay.Config{..., Observer: m}, ...), then m.Watch(rp).
	due := time.Now()
	m.Released(kafkadelay.Release{Source: "ontime.delay.1s", Due: due, Produced: due.Add(2 * time.Millisecond)})
	m.WatchStats(func() []kafkadelay.PartitionStats {
		return []kafkadelay.PartitionStats{{Topic: "ontime.delay.1s", Partition: 0, Owned: true}}
	})

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "ontime_kafka_released") || strings.HasPrefix(l, "ontime_kafka_partitions_owned") {
			fmt.Println(l)
		}
	}
	// Output:
	// ontime_kafka_partitions_owned 1
	// ontime_kafka_released_early_total{bucket="ontime.delay.1s"} 0
	// ontime_kafka_released_total{bucket="ontime.delay.1s"} 1
}
