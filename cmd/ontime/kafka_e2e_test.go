package main_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontime-go/ontime/kafkadelay"
	"github.com/ontime-go/ontime/kafkadelay/kafkaconfig"
)

// freePort returns a loopback TCP port nobody listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The README's Kafka walk-through with the real binary: `ontime dev-kafka`,
// `ontime republish` and `ontime kafka-schedule`, checked by kcat
// (librdkafka, an independent client) reading the destination: each
// record arrives with its key, value and headers, and not before its due
// instant.
func TestKafkaRepublishWithKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat is missing: `make deps` installs it (Debian package kcat)")
	}
	port := freePort(t)
	brokers := "127.0.0.1:" + strconv.Itoa(port)
	cfgPath := filepath.Join(t.TempDir(), "kafka.toml")
	cfg := `
[app.republisher]
enabled = true
delay_strategy_backend = "kafka_topic_delay_strategy"
stats_interval = "500ms"
[app.republisher.consumer]
bootstrap_servers = ["` + brokers + `"]
group_id = "e2e-republisher"
[app.republisher.producer]
bootstrap_servers = ["` + brokers + `"]
[app.republisher.delay_topics]
1 = "delay-1s"
5 = "delay-5s"
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := start(t, nil, "dev-kafka", "--config", cfgPath, "--port", strconv.Itoa(port), "--topic", "invoices")
	dev.waitLines(30*time.Second, 1)
	if got := dev.lines()[0].text; !strings.Contains(got, "listening on "+brokers) {
		t.Fatalf("dev-kafka printed %q", got)
	}
	rep := start(t, nil, "republish", "--config", cfgPath, "--metrics-listen", "127.0.0.1:0")
	rep.waitStderr(30*time.Second, "partitions assigned")
	m := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindStringSubmatch(rep.stderr())
	if m == nil {
		t.Fatalf("republish logged no metrics address:\n%s", rep.stderr())
	}
	metricsURL := "http://" + m[1] + "/metrics"

	// kcat reads the destination from the start; each line is read with
	// the instant it arrived.
	kc := exec.Command(kcat, "-b", brokers, "-C", "-t", "invoices", "-o", "beginning", "-u",
		"-f", `%k|%s|%h\n`)
	out, err := kc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := kc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Process.Kill(); _ = kc.Wait() })
	var mu sync.Mutex
	var got []line
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			mu.Lock()
			got = append(got, line{at: time.Now(), text: sc.Text()})
			mu.Unlock()
		}
	}()

	o1 := mustCLI(t, nil, nil, "kafka-schedule", "--config", cfgPath, "invoices", "in 2.5s", "--in", "2500ms",
		"--key", "k1", "--header", "tenant=acme")
	o2 := mustCLI(t, nil, nil, "kafka-schedule", "--config", cfgPath, "invoices", "already due", "--at", "2020-01-01T00:00:00Z", "--key", "k2")
	if !strings.Contains(o1, "via delay-1s") || !strings.Contains(o2, "via invoices") {
		t.Errorf("kafka-schedule output:\n%s%s", o1, o2)
	}
	if _, e, code := cli(t, nil, nil, "kafka-schedule", "--config", cfgPath, "invoices", "x", "--in", "soon"); code != 2 || !strings.Contains(e, `--in "soon"`) {
		t.Errorf("bad --in: exit %d, %s", code, e)
	}
	if _, e, code := cli(t, nil, nil, "kafka-schedule", "--config", cfgPath, "delay-5s", "x", "--in", "1s"); code != 7 || !strings.Contains(e, "is a bucket topic") {
		t.Errorf("bucket as destination: exit %d, %s", code, e)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	lines := append([]line(nil), got...)
	mu.Unlock()
	if len(lines) != 2 {
		t.Fatalf("kcat read %d records, want 2:\n%s\nrepublish stderr:\n%s", len(lines), dump(lines), rep.stderr())
	}
	byKey := map[string]line{}
	for _, l := range lines {
		byKey[strings.SplitN(l.text, "|", 2)[0]] = l
	}
	l1, ok := byKey["k1"]
	if !ok {
		t.Fatalf("no record with key k1:\n%s", dump(lines))
	}
	parts := strings.SplitN(l1.text, "|", 3)
	if parts[1] != "in 2.5s" || !strings.Contains(parts[2], "tenant=acme") || !strings.Contains(parts[2], "ontime-id=") {
		t.Errorf("k1 arrived as %q", l1.text)
	}
	var due time.Time
	for _, h := range strings.Split(parts[2], ",") {
		if v, ok := strings.CutPrefix(h, "ontime-due-ms="); ok {
			ms, _ := strconv.ParseInt(v, 10, 64)
			due = time.UnixMilli(ms)
		}
	}
	if due.IsZero() {
		t.Fatalf("k1 has no due header: %q", parts[2])
	}
	if l1.at.Before(due) {
		t.Errorf("k1 read by kcat %v before its due instant", due.Sub(l1.at))
	}
	t.Logf("k1 read by kcat %v after its due instant", l1.at.Sub(due))

	rep.waitStderr(10*time.Second, "released=1 rerouted=1")
	// Its metrics: k1 went delay-1s → delay-1s (1.5 s left) → invoices.
	code, mfs := scrapeURL(t, metricsURL, "")
	if code != 200 {
		t.Fatalf("republish /metrics: %d", code)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ontime_kafka_released_total", []string{"bucket", "delay-1s"}, 1},
		{"ontime_kafka_rerouted_total", []string{"from", "delay-1s", "to", "delay-1s"}, 1},
		{"ontime_kafka_released_early_total", []string{"bucket", "delay-1s"}, 0},
		{"ontime_kafka_release_lateness_seconds", []string{"bucket", "delay-1s"}, 1},
		{"ontime_kafka_rebalances_total", []string{"kind", "assigned"}, 1},
	} {
		if got := sample(mfs, c.name, c.labels...); got != c.want {
			t.Errorf("republish %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := sample(mfs, "ontime_kafka_partitions_owned"); got < 2 {
		t.Errorf("ontime_kafka_partitions_owned = %v, want the bucket partitions", got)
	}
	for _, name := range []string{"ontime_kafka_partition_head_late_seconds", "ontime_kafka_partition_held_records", "ontime_kafka_partition_paused", "go_goroutines"} {
		if got := sample(mfs, name, "topic", "delay-1s", "partition", "0"); got < 0 && !strings.HasPrefix(name, "go_") {
			t.Errorf("%s of delay-1s/0 is missing", name)
		}
	}
	checkObservabilityDoc(t, mfs)
	checkDashboard(t, mfs, filepath.Join("..", "..", "docs", "grafana-kafka-dashboard.json"))
	if code := rep.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("republish exited %d after SIGTERM; stderr:\n%s", code, rep.stderr())
	}
	if s := rep.stderr(); !strings.Contains(s, "partitions revoked") || !strings.Contains(s, "released_early=0") {
		t.Errorf("republish stderr lacks the revoke line or the stats:\n%s", s)
	}
	dev.stop(syscall.SIGTERM)
}

// Bad republisher configurations are refused before anything connects,
// naming the key, with exit code 2.
func TestRepublishConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, toml, want string }{
		{"unsorted", "[consumer]\nbootstrap_servers = [\"127.0.0.1:1\"]\ngroup_id = \"g\"\n[delay_topics]\n60 = \"b\"\n5 = \"a\"\n", "delay_topics.5: delays must be in increasing order"},
		{"no brokers", "[delay_topics]\n5 = \"a\"\n", "consumer.bootstrap_servers: missing"},
	} {
		p := filepath.Join(dir, tc.name+".toml")
		if err := os.WriteFile(p, []byte(tc.toml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, e, code := cli(t, nil, nil, "republish", "--config", p)
		if code != 2 || !strings.Contains(e, tc.want) || !strings.Contains(e, p) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming the file and %q", tc.name, code, e, tc.want)
		}
	}
	if _, e, code := cli(t, nil, nil, "republish"); code != 2 || !strings.Contains(e, "--config FILE is required") {
		t.Errorf("no --config: exit %d, %s", code, e)
	}
}

// The configuration the README and docs/kafka.md tell newcomers to use
// loads, and is the recommended ladder.
func TestDocsKafkaConfig(t *testing.T) {
	fc, err := kafkaconfig.Load(filepath.Join("..", "..", "docs", "kafka.toml"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := kafkadelay.RecommendedLadder("ontime.delay.").Buckets()
	got := fc.Ladder.Buckets()
	if len(got) != len(want) {
		t.Fatalf("docs/kafka.toml has %d buckets, the recommended ladder %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bucket %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
