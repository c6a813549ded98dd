package kafkadelay_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pythonWithKafka is Debian's interpreter, which has python3-confluent-kafka
// (librdkafka) once `make deps` installed it; a python3 earlier on PATH
// (pyenv, a virtualenv) may not.
const pythonWithKafka = "/usr/bin/python3"

// A second language: records produced by librdkafka from Python
// (python3-confluent-kafka), by a script that follows only docs/kafka.md's
// header contract, reach their destination through the republisher at
// their due instants, none early, with key, value and headers unchanged.
func TestPythonProducer(t *testing.T) {
	if out, err := exec.Command(pythonWithKafka, "-c", "import confluent_kafka").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import confluent_kafka (`make deps` installs the Debian package python3-confluent-kafka): %v\n%s",
			pythonWithKafka, err, out)
	}
	c := newCluster(t)
	s := c.sink(t)
	r := c.republisher(t, nil)
	buckets := c.ladder.Buckets()
	want := len(buckets) * partitions
	waitUntil(t, 30*time.Second, func() bool { return owned(r) >= want }, func() string {
		return fmt.Sprintf("the republisher owns %d partitions, want %d", owned(r), want)
	})

	var ladder []string
	for _, b := range buckets {
		ladder = append(ladder, strconv.FormatFloat(b.Delay.Seconds(), 'f', -1, 64)+"="+b.Topic)
	}
	// Delays over every rung, between rungs, past the largest, and one
	// already due.
	delays := []int{-500, 50, 150, 200, 350, 500, 700, 1000, 1300, 2000, 2600, 3000, 4500, 6100}
	for i := 0; i < 40; i++ {
		delays = append(delays, 100+i*97)
	}
	args := []string{filepath.Join("testdata", "produce_delayed.py"), strings.Join(c.addrs, ","), strings.Join(ladder, ","), "orders"}
	for _, d := range delays {
		args = append(args, strconv.Itoa(d))
	}
	cmd := exec.Command(pythonWithKafka, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("produce_delayed.py: %v\n%s", err, stderr.String())
	}
	pub := make(map[string]published)
	viaBucket := map[string]int{}
	for _, ln := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(ln, "\t")
		if len(f) != 3 {
			t.Fatalf("produce_delayed.py printed %q", ln)
		}
		ms, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("produce_delayed.py printed %q: %v", ln, err)
		}
		pub[f[0]] = published{id: f[0], due: time.UnixMilli(ms), pastDue: f[2] == "orders"}
		viaBucket[f[2]]++
	}
	if len(pub) != len(delays) {
		t.Fatalf("produce_delayed.py printed %d records, want %d:\n%s", len(pub), len(delays), out)
	}
	for _, b := range buckets {
		if viaBucket[b.Topic] == 0 {
			t.Errorf("no record went to bucket %s (by topic: %v)", b.Topic, viaBucket)
		}
	}
	s.waitFor(t, 60*time.Second, "every Python record", func(s *sink) bool { return len(s.got) >= len(pub) })
	dups, lateness := s.check(t, pub)
	t.Logf("%d records from librdkafka; %s; duplicates %d; produced to %v", len(pub), latenessLine(lateness), dups, viaBucket)
	if worst := lateness[len(lateness)-1]; worst > 2*time.Second {
		t.Errorf("a record arrived %v after its due instant", worst)
	}
	s.mu.Lock()
	for _, ds := range s.got {
		d := ds[0]
		i := strings.TrimPrefix(d.key, "py-")
		if d.value != "\x00\xffvalue-"+i || headerOf(d.headers, "user") != "py-"+i || d.topic != "orders" {
			t.Errorf("record %s arrived as topic %q key %q value %q headers %v", d.id, d.topic, d.key, d.value, d.headers)
		}
	}
	dead := len(s.dead)
	s.mu.Unlock()
	if dead != 0 {
		t.Errorf("%d records dead-lettered", dead)
	}
	var early int64
	for _, st := range r.Stats() {
		early += st.ReleasedEarly
	}
	if early != 0 {
		t.Errorf("the republisher counted %d early releases", early)
	}
	r.stop(t)
}

// owned counts the partitions the republisher owns.
func owned(r *runner) int {
	n := 0
	for _, st := range r.Stats() {
		if st.Owned {
			n++
		}
	}
	return n
}

func headerOf(hs []kgo.RecordHeader, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
