package harness

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEmbeddedTargetsAndMarkdown(t *testing.T) {
	r := &Report{Config: Config{W: 64, HTTPBaseline: "abc123", HTTPConcurrency: 32, HTTPFor: 8 * time.Second, PublishFor: 3 * time.Second, EmbeddedN: 20000}.withDefaults()}
	run := func(e2e F) ThroughputRun {
		return ThroughputRun{PublishSingle: 1000, PublishBatch: 50000, Drain: []F{e2e * 1.2}, E2E: e2e}
	}
	for _, x := range []struct {
		name string
		e2e  F
	}{{"ontime-embedded", 45000}, {"river-sqlite", 300}, {"river-sqlite-tuned", 900}} {
		r.Embedded = append(r.Embedded, ThroughputResult{System: x.name, N: 20000, Runs: []ThroughputRun{run(x.e2e)}, Median: run(x.e2e)})
	}
	pub := func(name string, one, sixteen, sixtyFour F) PublishResult {
		m := map[int]F{1: one, 16: sixteen, 64: sixtyFour}
		return PublishResult{System: name, Runs: []PublishRun{{Rates: m}}, Median: m}
	}
	r.Publish = []PublishResult{
		pub("ontime", 10000, 60000, 90000), pub("ontime-direct", 10000, 20000, 20000),
		pub("ontime-embedded", 300, 4000, 15000), pub("ontime-embedded-direct", 300, 1000, 1500),
	}
	h := func(store, build string, rps F) HTTPResult {
		x := HTTPRun{PerSecond: rps, P50: 2, P99: 8}
		return HTTPResult{Store: store, Build: build, Runs: []HTTPRun{x}, Median: x}
	}
	r.HTTP = []HTTPResult{h("redis", "ontime", 25000), h("redis", "ontime@abc123", 10000), h("embedded", "ontime", 9000), h("embedded", "ontime@abc123", 6000)}
	targets := embeddedTargets(r)
	want := []string{statusMet, statusMet, statusMet, statusMet, statusMet, statusMet, statusNotMet}
	if len(targets) != len(want) {
		t.Fatalf("targets = %+v", targets)
	}
	for i, tg := range targets {
		if tg.Status != want[i] {
			t.Errorf("target %q: %s, want %s (%s)", tg.What, tg.Status, want[i], tg.Measured)
		}
	}
	if !strings.Contains(targets[1].Measured, "50.0× (45.0k/s vs 900/s, river-sqlite-tuned)") {
		t.Errorf("River ratio: %s", targets[1].Measured)
	}
	charts := map[string][]byte{}
	embeddedCharts(r, charts)
	for _, name := range []string{"embedded.png", "publish_callers.png"} {
		img, err := png.Decode(bytes.NewReader(charts[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !hasInk(img) {
			t.Errorf("%s is blank", name)
		}
	}
	md := embeddedMarkdown(r, "bench/", charts)
	for _, s := range []string{"## Embedded stores", "## One-by-one publish", "## HTTP publish", "bench/embedded.png", "| ontime |  | 10.0k | 60.0k | 90.0k | 6.00× | 9.00× | 3.00× |", "| redis | ontime | 25.0k | 25.0k | 2.00 | 8.00 | 2.50× |"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	if m := embeddedMethod(r); !strings.Contains(m, "abc123") || !strings.Contains(m, "synchronous=FULL") {
		t.Errorf("method: %s", m)
	}
}

// TestRunEmbeddedSmall runs the embedded and publish scenarios at a tiny
// size: ontime's embedded store, River on SQLite and the direct baseline.
func TestRunEmbeddedSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	requireRedis(t)
	dir := t.TempDir()
	var log bytes.Buffer
	cfg := Config{
		Out: dir, Log: &log, Runs: 1, EmbeddedN: 200, W: 8, Publishers: 2, Batch: 50, PublishFor: 200 * time.Millisecond,
		Scenarios:    []string{ScenarioEmbedded, ScenarioPublish},
		Systems:      []string{"ontime-embedded", "river-sqlite-tuned", "ontime-embedded-direct"},
		PhaseTimeout: 30 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, e := range rep.Errors {
		t.Errorf("error: %s", e)
	}
	if len(rep.Embedded) != 2 || rep.Embedded[0].Median.E2E <= 0 || rep.Embedded[1].Median.E2E <= 0 {
		t.Errorf("embedded: %+v", rep.Embedded)
	}
	if len(rep.Publish) != 2 || rep.Publish[0].Median[16] <= 0 {
		t.Errorf("publish: %+v", rep.Publish)
	}
	for _, name := range []string{"BENCHMARKS.md", "bench/embedded.png", "bench/publish_callers.png"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}
