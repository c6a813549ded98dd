package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
	"github.com/ontime-go/ontime/kafkadelay/kafkaconfig"
)

// kafkaTOML writes a republisher configuration for brokers with the 1s and
// 5s buckets, plus extra lines, and returns its path.
func kafkaTOML(t *testing.T, brokers, extra string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kafka.toml")
	cfg := `stats_interval = "200ms"
` + extra + `
[consumer]
bootstrap_servers = ["` + brokers + `"]
group_id = "dest-republisher"
[delay_topics]
1 = "delay-1s"
5 = "delay-5s"
`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// dev-kafka creates a topic on first use for every client, the
// republisher's included: a record scheduled to a topic nobody created is
// delivered there at its due instant, not dead-lettered with
// UNKNOWN_TOPIC_OR_PARTITION.
func TestDevKafkaCreatesDestinations(t *testing.T) {
	port := freePort(t)
	brokers := "127.0.0.1:" + strconv.Itoa(port)
	cfgPath := kafkaTOML(t, brokers, "")
	dev := start(t, nil, "dev-kafka", "--config", cfgPath, "--port", strconv.Itoa(port))
	dev.waitLines(30*time.Second, 1)
	rep := start(t, nil, "republish", "--config", cfgPath)
	rep.waitStderr(30*time.Second, "partitions assigned")

	out := mustCLI(t, nil, nil, "kafka-schedule", "--config", cfgPath, "brand.new.topic", "x", "--in", "1s", "--key", "k")
	if !strings.Contains(out, "via delay-1s") {
		t.Errorf("kafka-schedule printed %q", out)
	}
	// A second one from the Go producer, which never looks the
	// destination up: only the republisher's produce can create it.
	pcl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	fc, err := kafkaconfig.Load(cfgPath, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := kafkadelay.NewProducer(pcl, fc.Ladder)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PublishIn(context.Background(), &kgo.Record{Topic: "other.new.topic", Key: []byte("k"), Value: []byte("x")}, time.Second); err != nil {
		t.Fatal(err)
	}
	if !rep.waitFor(60*time.Second, func() bool {
		s := rep.errBuf.String()
		return strings.Contains(s, "released=2 ") || strings.Contains(s, "dead_lettered=1 ") || strings.Contains(s, "dead_lettered=2 ")
	}) {
		t.Fatalf("republish released nothing within 60s; stderr:\n%s", rep.stderr())
	}
	if s := rep.stderr(); !strings.Contains(s, "released=2 ") || strings.Contains(s, "dead_lettered=1 ") || strings.Contains(s, "dead_lettered=2 ") {
		t.Fatalf("the records were not released (or were dead-lettered); stderr:\n%s", s)
	}
	for _, topic := range []string{"brand.new.topic", "other.new.topic"} {
		readBack(t, brokers, topic)
	}
	if code := rep.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("republish exited %d; stderr:\n%s", code, rep.stderr())
	}
	dev.stop(syscall.SIGTERM)
}

// readBack checks that topic holds one record, key "k" and value "x",
// produced at or after its due instant. It reads after the release: its
// metadata request would create the topic on dev-kafka too.
func readBack(t *testing.T, brokers, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs := cl.PollRecords(ctx, 10)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Key) != "k" || string(recs[0].Value) != "x" {
		t.Fatalf("%s holds %d records: %v", topic, len(recs), recs)
	}
	meta, err := kafkadelay.ParseMeta(recs[0].Headers)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Timestamp.Before(meta.Due) {
		t.Errorf("produced to %s %v before its due instant", topic, meta.Due.Sub(recs[0].Timestamp))
	}
}

// kafka-schedule warns when the destination does not exist on a cluster
// that does not create topics on first use, and says what happens to the
// record then; the record is still scheduled (exit 0).
func TestKafkaScheduleWarnsMissingDestination(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "delay-1s", "delay-5s", "exists"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()[0]
	plain := kafkaTOML(t, brokers, "")
	creating := kafkaTOML(t, brokers, "create_destinations = true\ndestination_partitions = 3")
	for _, tc := range []struct {
		cfg, topic, want string
	}{
		{plain, "brand.new.topic", `warning: topic "brand.new.topic" does not exist on ` + brokers + `: the republisher dead-letters the record`},
		{creating, "brand.new.topic", `warning: topic "brand.new.topic" does not exist on ` + brokers + `: the republisher creates it`},
		{plain, "exists", ""},
	} {
		out, e, code := cli(t, nil, nil, "kafka-schedule", "--config", tc.cfg, tc.topic, "x", "--in", "1s")
		if code != 0 || !strings.Contains(out, "via delay-1s") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", tc.topic, code, out, e)
		}
		if tc.want == "" && strings.Contains(e, "warning") || tc.want != "" && !strings.Contains(e, tc.want) {
			t.Errorf("%s: stderr %q, want %q", tc.topic, e, tc.want)
		}
	}
}
