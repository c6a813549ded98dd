package harness

import (
	"strings"
	"testing"
)

func TestManyTopicsTargetsAndMarkdown(t *testing.T) {
	r := &Report{Config: Config{Rate: 2000}.withDefaults()}
	lat := func(topics int, how string, p99 F, early F) ManyTopicsLateness {
		s := LatencySummary{Count: 100, P50: 1, P90: 2, P99: p99, Max: p99 * 2, EarlyShare: early}
		return ManyTopicsLateness{Topics: topics, How: how, Runs: []LatenessRun{{Summary: s}}, Median: s}
	}
	r.ManyTopics = &ManyTopicsResult{
		Idle: []ManyTopicsIdle{
			{Topics: 100, ServerPct: 0.1, RedisPct: 0.2},
			{Topics: 10000, ServerPct: 0.2, RedisPct: 0.3},
			{Topics: 100000, ServerPct: 0.5, RedisPct: 1.0},
		},
		Lateness: []ManyTopicsLateness{lat(1, "Handle", 4, 0), lat(10000, "HandleTopics", 4.4, 0)},
	}
	targets := manyTopicsTargets(r)
	want := []string{statusMet, statusMet, statusMet}
	if len(targets) != len(want) {
		t.Fatalf("targets: %+v", targets)
	}
	for i, tg := range targets {
		if tg.Status != want[i] {
			t.Errorf("target %q: %s (%s), want %s", tg.What, tg.Status, tg.Measured, want[i])
		}
	}
	// Over the bounds: not met.
	r.ManyTopics.Idle[2].RedisPct = 1.6
	r.ManyTopics.Lateness[1] = lat(10000, "HandleTopics", 5, 0.01)
	for _, tg := range manyTopicsTargets(r) {
		if tg.Status != statusNotMet {
			t.Errorf("target %q: %s (%s), want not met", tg.What, tg.Status, tg.Measured)
		}
	}
	md := manyTopicsMarkdown(r)
	for _, s := range []string{"## Many topics", "| 100000 | 0.50 | 1.60 | **2.10** |", "| 10000 | `HandleTopics` |"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	if manyTopicsTargets(&Report{}) != nil || manyTopicsMarkdown(&Report{}) != "" {
		t.Error("a report without the scenario has many-topics targets or tables")
	}
}
