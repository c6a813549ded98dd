package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestQuantileAndMedian(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if q := quantile(s, 0.5); q != 5 {
		t.Errorf("p50 = %v, want 5", q)
	}
	if q := quantile(s, 0.99); q != 10 {
		t.Errorf("p99 = %v, want 10", q)
	}
	if m := median([]float64{3, math.NaN(), 1, 2}); m != 2 {
		t.Errorf("median = %v, want 2", m)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is not NaN")
	}
	sum := summarize([]float64{-2, 1, 3})
	if sum.EarlyShare != F(1.0/3) || sum.EarlyMax != 2 || sum.Max != 3 {
		t.Errorf("summary = %+v", sum)
	}
}

func TestBodyRoundTrip(t *testing.T) {
	due := time.Unix(1700000000, 123456789)
	b := makeBody(due, 42, 7, 100)
	if len(b) != 100 {
		t.Fatalf("len %d", len(b))
	}
	d, seq, tag, ok := parseBody(b)
	if !ok || d != due.UnixNano() || seq != 42 || tag != 7 {
		t.Fatalf("parse = %v %v %v %v", d, seq, tag, ok)
	}
	tr := newTracker(2)
	tr.handle(tr.body(time.Time{}, 0, 20))
	tr.handle(tr.body(time.Time{}, 0, 20))
	tr.handle(tr.body(time.Time{}, 1, 20))
	tr.handle(makeBody(time.Time{}, 1, tr.tag+1, 20))
	select {
	case <-tr.done:
	default:
		t.Fatal("tracker not done")
	}
	if tr.total.Load() != 3 || tr.unique.Load() != 2 || tr.bad.Load() != 1 {
		t.Fatalf("total %d unique %d bad %d", tr.total.Load(), tr.unique.Load(), tr.bad.Load())
	}
}

func TestFormatting(t *testing.T) {
	for v, want := range map[float64]string{1500: "1.5k", 2_000_000: "2M", 0.25: "0.25", 12: "12", 0: "0"} {
		if got := fmtShort(v); got != want {
			t.Errorf("fmtShort(%v) = %q, want %q", v, got, want)
		}
	}
	if got := niceCeil(73000); got != 100000 {
		t.Errorf("niceCeil = %v", got)
	}
	if b, _ := json.Marshal(F(math.NaN())); string(b) != "null" {
		t.Errorf("NaN marshals as %s", b)
	}
}

func TestSplice(t *testing.T) {
	doc := spliceGenerated("", "A\n")
	if !strings.Contains(doc, beginMarker) || !strings.Contains(doc, "A\n"+endMarker) {
		t.Fatalf("new doc:\n%s", doc)
	}
	doc = "intro\n" + beginMarker + "\nold\n" + endMarker + "\noutro\n"
	got := spliceGenerated(doc, "new\n")
	if got != "intro\n"+beginMarker+"\nnew\n"+endMarker+"\noutro\n" {
		t.Fatalf("spliced:\n%s", got)
	}
}

// fakeReport is a report with every section filled, as a full run makes.
func fakeReport() *Report {
	r := &Report{Started: time.Unix(1700000000, 0), Duration: time.Minute, Config: Config{}.withDefaults(),
		Host: Host{CPUModel: "test cpu", NumCPU: 2, Go: "go1.x", Redis: "7.0"}}
	r.Systems = allSpecs(r.Config)
	r.Raw = &RawResult{Command: "redis-benchmark -P 16", Runs: []F{400000}, Median: 400000}
	tp := func(name string, e2e, batch float64) ThroughputResult {
		m := ThroughputRun{PublishSingle: 30000, PublishBatch: F(batch), Drain: []F{40000}, E2E: F(e2e),
			RTPublishSingle: 1, RTPublishBatch: 0.01, RTWork: 0.1, CmdPublishSingle: 3, CmdPublishBatch: 3, CmdWork: 8,
			RedisCPUPublishBatch: 5, RedisCPUWork: 10}
		return ThroughputResult{System: name, N: 1000, Runs: []ThroughputRun{m}, Median: m}
	}
	r.Throughput = []ThroughputResult{tp("ontime", 60000, 150000), tp("ontime-compat", 55000, 140000), tp("asynq", 5000, math.NaN())}
	r.Lateness = []LatenessResult{
		{System: "ontime", Runs: []LatenessRun{{Summary: summarize([]float64{1, 2, 3})}}, Median: summarize([]float64{1, 2, 3}), samples: []float64{1, 2, 3}},
		{System: "asynq", Runs: []LatenessRun{{Summary: summarize([]float64{-5, 3000})}}, Median: summarize([]float64{-5, 3000}), samples: []float64{-5, 3000}},
	}
	r.Idle = []IdleResult{{System: "ontime", Samples: []F{2}, Median: 2, Max: 2}}
	r.Memory = []MemoryResult{{System: "ontime", BodySize: 100, Runs: []F{500}, Median: 500}, {System: "ontime-compat", BodySize: 100, Runs: []F{450}, Median: 450}}
	r.Scale = []ScaleResult{{System: "ontime", Ratio: 1.2, Sizes: []ScaleSize{
		{Pending: 10000, Claims: 10, Claim: summarize([]float64{0.1, 0.2})},
		{Pending: 10000000, Claims: 10, Claim: summarize([]float64{0.1, 0.24})}}}}
	r.Crash = []CrashResult{{System: "ontime", Timers: 10, HandledBeforeKill: 5, Recovery: 1.5, Lease: "2s"}}
	r.Targets = evaluateTargets(r)
	return r
}

// The Kafka scenario's targets and section: met, not met, and the early
// count taken from both the consumer's samples and the republisher's.
func TestKafkaTargetsAndMarkdown(t *testing.T) {
	r := fakeReport()
	r.Kafka = &KafkaResult{Brokers: 3, Partitions: 6, N: 1000, Republisher: []F{70, 80, 90}, Forwarder: []F{100, 100, 100}, Ratio: 0.8,
		Rate: 2000, For: time.Second, DelayMin: time.Second, DelayMax: 30 * time.Second,
		Lateness: summarize([]float64{1, 2, 3, 15}), ProduceLateness: summarize([]float64{0.5, 1}), MemoryRecords: 10, MemoryPerRecord: 1100}
	r.Targets = evaluateTargets(r)
	got := map[string]string{}
	for _, tg := range r.Targets {
		if strings.HasPrefix(tg.What, "Kafka") {
			got[tg.Goal] = tg.Status
		}
	}
	if got["≤ 20 ms, 0 early, 0 lost"] != statusMet || got["≥ 0.7×"] != statusMet {
		t.Errorf("Kafka targets %v, want both met", got)
	}
	md := Markdown(r, "bench/", nil)
	for _, want := range []string{"## Kafka delay topics (kfake)", "| republisher | 70, 80, 90 | 80 |", "Ratio of the medians: **0.80×**", "1100 bytes per in-flight record"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	r.Kafka.ReleasedEarly = 1
	r.Kafka.Ratio = 0.5
	for _, tg := range evaluateTargets(r) {
		if strings.HasPrefix(tg.What, "Kafka") && tg.Status != statusNotMet {
			t.Errorf("%s %s: %s with an early release and a 0.5 ratio, want not met", tg.What, tg.Goal, tg.Status)
		}
	}
}

func TestTargetsAndMarkdown(t *testing.T) {
	r := fakeReport()
	st := map[string]string{}
	for _, tg := range r.Targets {
		st[strings.Fields(tg.What)[0]+" "+tg.Goal] = tg.Status
	}
	want := map[string]string{
		"end-to-end ≥ 50k/s":                             statusMet,
		"end-to-end ≥ 10× asynq":                         statusMet,
		"batched ≥ 85 %":                                 statusNotMet,
		"Redis ≤ 1.2× the compatible layout":             statusMet,
		"scale claim p99 at 10M pending ≤ 1.5× at 10k":   statusMet,
		"Kafka p99 ≤ 20 ms, 0 early; ≥ 0.7× a forwarder": statusNotMeas,
	}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("target %q: %q, want %q (all: %v)", k, st[k], v, st)
		}
	}
	charts := renderCharts(r)
	for _, name := range []string{"throughput.png", "publish.png", "lateness.png", "scale.png"} {
		b, ok := charts[name]
		if !ok {
			t.Errorf("no %s", name)
			continue
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s is not a PNG: %v", name, err)
		}
		if sz := img.Bounds().Size(); sz.X < 400 || sz.Y < 100 {
			t.Errorf("%s is %v", name, sz)
		}
		if !hasInk(img) {
			t.Errorf("%s is blank", name)
		}
	}
	md := Markdown(r, "bench/", charts)
	for _, s := range []string{"## Method", "## Targets", "## Throughput", "## Lateness", "## Redis memory", "## Scale", "## Crash", "bench/lateness.png", "test cpu"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q", s)
		}
	}
	if Summary(r) == "" {
		t.Error("empty summary")
	}
}

// TestRunSmall runs the harness end to end at a tiny size against a
// redis-server it starts (skipped when there is none).
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	requireRedis(t)
	dir := t.TempDir()
	var log bytes.Buffer
	cfg := Config{
		Out: dir, Log: &log, Runs: 1, N: 300, W: 8, Publishers: 2, Batch: 50,
		Rate: 200, LatenessFor: 300 * time.Millisecond, Idle: 200 * time.Millisecond, IdleDelay: 50 * time.Millisecond,
		MemoryTimers: 200, ScaleSizes: []int{100, 1000}, ScaleClaims: 20, RawOps: 20000,
		Scenarios:    []string{ScenarioRaw, ScenarioThroughput, ScenarioLateness, ScenarioIdle, ScenarioMemory, ScenarioScale},
		Systems:      []string{"ontime", "pipeline"},
		PhaseTimeout: 30 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, e := range rep.Errors {
		if !strings.HasPrefix(e, "raw:") { // redis-benchmark may be missing
			t.Errorf("error: %s", e)
		}
	}
	if len(rep.Throughput) != 2 || rep.Throughput[0].Median.E2E <= 0 {
		t.Errorf("throughput: %+v", rep.Throughput)
	}
	for _, l := range rep.Lateness {
		if l.Median.EarlyShare != 0 {
			t.Errorf("%s fired early: %+v", l.System, l.Median)
		}
	}
	for _, name := range []string{"BENCHMARKS.md", "bench/results.json", "bench/throughput.png", "bench/lateness.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}

// requireRedis fails the test when no redis-server can be started (`make
// deps` installs it): a run that needs it must not pass without it.
func requireRedis(t *testing.T) {
	t.Helper()
	if _, err := startRedisProbe(); err != nil {
		t.Fatalf("redis-server is needed (make deps installs it): %v", err)
	}
}

// startRedisProbe reports whether a redis-server can be started.
func startRedisProbe() (string, error) {
	s, err := StartRedis(context.Background(), "")
	if err != nil {
		return "", err
	}
	v := s.Version
	s.Stop()
	return v, nil
}

// hasInk reports whether img has coloured (non-grey) pixels: bars or lines
// were drawn, not just the frame and text.
func hasInk(img image.Image) bool {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if max(r, g, bl)-min(r, g, bl) > 0x4000 {
				return true
			}
		}
	}
	return false
}
