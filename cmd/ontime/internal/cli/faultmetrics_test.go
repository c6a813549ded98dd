package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ontime-go/ontime/internal/redistest"
	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// TestTopicFaultMetrics: while calls on a topic fail because Redis cannot
// be reached, the metrics count and name it; once a call succeeds again
// they do not.
func TestTopicFaultMetrics(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	d, err := ontimeredis.New(srv.NewClient(t), &ontimeredis.Options{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	reg := prometheus.NewRegistry()
	if err := registerTopicFaults(reg, d); err != nil {
		t.Fatal(err)
	}
	schedule := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		_, err := d.Schedule(ctx, "orders", []ontimedriver.NewTimer{{ID: "a", Payload: []byte("x")}}, ontimedriver.Upsert)
		return err
	}
	want := func(n int, topic string) {
		t.Helper()
		exp := "# HELP ontime_store_unavailable_topics Topics whose store calls fail although the store answers (a Redis Cluster master down until its replica is promoted).\n" +
			"# TYPE ontime_store_unavailable_topics gauge\n" +
			"ontime_store_unavailable_topics " + map[int]string{0: "0", 1: "1"}[n] + "\n"
		if topic != "" {
			exp += "# HELP ontime_store_topic_unavailable 1 for each topic whose store calls fail now (at most 100 topics by name).\n" +
				"# TYPE ontime_store_topic_unavailable gauge\n" +
				"ontime_store_topic_unavailable{topic=\"" + topic + "\"} 1\n"
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "ontime_store_unavailable_topics", "ontime_store_topic_unavailable"); err != nil {
			t.Error(err)
		}
	}
	if err := schedule(); err != nil {
		t.Fatal(err)
	}
	want(0, "")
	srv.Kill()
	if err := schedule(); err == nil {
		t.Fatal("schedule succeeded on a killed server")
	}
	want(1, "orders")
	srv.Restart()
	if err := schedule(); err != nil {
		t.Fatal(err)
	}
	want(0, "")
}
