package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Target is one of DESIGN.md's targets as this run measured it.
type Target struct {
	What     string `json:"what"`
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	// Status is "met", "not met" or "not measured".
	Status string `json:"status"`
}

const (
	statusMet     = "met"
	statusNotMet  = "not met"
	statusNotMeas = "not measured"
)

func status(ok bool) string {
	if ok {
		return statusMet
	}
	return statusNotMet
}

// first returns the first element of xs that keep accepts, or nil.
func first[T any](xs []T, keep func(*T) bool) *T {
	for i := range xs {
		if keep(&xs[i]) {
			return &xs[i]
		}
	}
	return nil
}

// measuredThroughput returns a system's throughput result that has runs
// and no error.
func measuredThroughput(rs []ThroughputResult, name string) *ThroughputResult {
	return first(rs, func(x *ThroughputResult) bool { return x.System == name && x.Err == "" && len(x.Runs) > 0 })
}

func (r *Report) throughputOf(name string) *ThroughputResult {
	return measuredThroughput(r.Throughput, name)
}

func (r *Report) latenessOf(name string) *LatenessResult {
	return first(r.Lateness, func(x *LatenessResult) bool { return x.System == name && len(x.Runs) > 0 })
}

func (r *Report) idleOf(name string) *IdleResult {
	return first(r.Idle, func(x *IdleResult) bool { return x.System == name })
}

func (r *Report) memoryOf(name string, body int) *MemoryResult {
	return first(r.Memory, func(x *MemoryResult) bool { return x.System == name && x.BodySize == body && len(x.Runs) > 0 })
}

func isNaN(f F) bool { return math.IsNaN(float64(f)) }

// faststreamDefault is DESIGN.md's anchor for faststream-redis-timers at its
// defaults (timers/s); it is not measured by this harness (a Python peer).
const faststreamDefault = 92

func evaluateTargets(r *Report) []Target {
	var out []Target
	add := func(what, goal, measured, st string) {
		out = append(out, Target{What: what, Goal: goal, Measured: measured, Status: st})
	}
	on := r.throughputOf("ontime")
	// End to end.
	if on == nil || isNaN(on.Median.E2E) {
		add("end-to-end timers/s", "≥ 50k/s", "-", statusNotMeas)
		add("end-to-end vs asynq", "≥ 10× asynq", "-", statusNotMeas)
	} else {
		e2e := float64(on.Median.E2E)
		add("end-to-end timers/s (native, N="+fmtShort(float64(on.N))+")", "≥ 50k/s", fmtRate(on.Median.E2E)+"/s", status(e2e >= 50000))
		if p := r.throughputOf("pipeline"); p != nil && !isNaN(p.Median.E2E) && p.Median.E2E > 0 {
			ratio := e2e / float64(p.Median.E2E)
			add("end-to-end vs the hand-written pipeline (DESIGN.md; same guarantees: leases, fencing, attempts)", "≥ 0.85×",
				fmt.Sprintf("%.2f× (%s/s vs %s/s)", ratio, fmtRate(on.Median.E2E), fmtRate(p.Median.E2E)), status(ratio >= 0.85))
		}
		if a := r.throughputOf("asynq"); a != nil && !isNaN(a.Median.E2E) {
			ratio := e2e / float64(a.Median.E2E)
			m := fmt.Sprintf("%.1f× (%s/s vs %s/s)", ratio, fmtRate(on.Median.E2E), fmtRate(a.Median.E2E))
			if t := r.throughputOf("asynq-tuned"); t != nil && !isNaN(t.Median.E2E) {
				m += fmt.Sprintf("; %.1f× asynq-tuned", e2e/float64(t.Median.E2E))
			}
			add("end-to-end vs asynq", "≥ 10× asynq", m, status(ratio >= 10))
		} else {
			add("end-to-end vs asynq", "≥ 10× asynq", "-", statusNotMeas)
		}
		add("end-to-end vs faststream-redis-timers defaults", "≥ 50× (anchor 92/s from DESIGN.md, not measured here)",
			fmt.Sprintf("%.0f× the anchor", e2e/faststreamDefault), status(e2e/faststreamDefault >= 50))
	}
	// Batched publish.
	if on != nil && r.Raw != nil && !isNaN(on.Median.PublishBatch) && !isNaN(r.Raw.Median) && r.Raw.Median > 0 {
		ratio := float64(on.Median.PublishBatch) / float64(r.Raw.Median)
		add("batched publish vs redis-benchmark -P 16 ZADD", "≥ 85 %",
			fmt.Sprintf("%.0f %% (%s/s vs %s ZADD/s)", 100*ratio, fmtRate(on.Median.PublishBatch), fmtRate(r.Raw.Median)), status(ratio >= 0.85))
	} else {
		add("batched publish vs redis-benchmark -P 16 ZADD", "≥ 85 %", "-", statusNotMeas)
	}
	// Lateness.
	if l := r.latenessOf("ontime"); l != nil {
		p99 := float64(l.Median.P99)
		add(fmt.Sprintf("lateness p99 at %d timers/s", r.Config.Rate), "≤ 5 ms",
			fmt.Sprintf("%.2f ms (p50 %.2f ms); early: %.2f %%", p99, float64(l.Median.P50), 100*float64(l.Median.EarlyShare)), status(p99 <= 5 && l.Median.EarlyShare == 0))
	} else {
		add(fmt.Sprintf("lateness p99 at %d timers/s", r.Config.Rate), "≤ 5 ms", "-", statusNotMeas)
	}
	if id := r.idleOf("ontime"); id != nil && len(id.Samples) > 0 && !isNaN(id.Max) {
		add(fmt.Sprintf("first timer on a queue idle for %s", r.Config.Idle), "≤ 5 ms late",
			fmt.Sprintf("worst %.2f ms, median %.2f ms of %d", float64(id.Max), float64(id.Median), len(id.Samples)), status(float64(id.Max) <= 5 && float64(id.Max) >= 0))
	} else {
		add("first timer on an idle queue", "≤ 5 ms late", "-", statusNotMeas)
	}
	// Memory.
	nat, cmp := r.memoryOf("ontime", 100), r.memoryOf("ontime-compat", 100)
	if nat != nil && cmp != nil && cmp.Median > 0 {
		ratio := float64(nat.Median) / float64(cmp.Median)
		add("Redis memory per timer (100-byte body)", "≤ 1.2× the compatible layout",
			fmt.Sprintf("%.2f× (%.0f B vs %.0f B)", ratio, float64(nat.Median), float64(cmp.Median)), status(ratio <= 1.2))
	} else {
		add("Redis memory per timer (100-byte body)", "≤ 1.2× the compatible layout", "-", statusNotMeas)
	}
	// Scale.
	var sc *ScaleResult
	for i := range r.Scale {
		if r.Scale[i].System == "ontime" && len(r.Scale[i].Sizes) >= 2 {
			sc = &r.Scale[i]
		}
	}
	if sc != nil {
		lo, hi := sc.Sizes[0], sc.Sizes[len(sc.Sizes)-1]
		goal := "claim p99 at 10M pending ≤ 1.5× at 10k"
		m := fmt.Sprintf("%.2f× (p99 %.3f ms at %s vs %.3f ms at %s)", float64(sc.Ratio), float64(hi.Claim.P99), fmtShort(float64(hi.Pending)), float64(lo.Claim.P99), fmtShort(float64(lo.Pending)))
		st := status(float64(sc.Ratio) <= 1.5)
		if hi.Pending < 10_000_000 {
			m += "; largest size run: " + fmtShort(float64(hi.Pending)) + ", not 10M"
		}
		add("scale", goal, m, st)
	} else {
		add("scale", "claim p99 at 10M pending ≤ 1.5× at 10k", "-", statusNotMeas)
	}
	if k := r.Kafka; k != nil && k.Err == "" && k.Lateness.Count > 0 {
		early := k.ReleasedEarly + int64(math.Round(float64(k.Lateness.EarlyShare)*float64(k.Lateness.Count)))
		add(fmt.Sprintf("Kafka republisher (kfake): lateness p99 at %d records/s, delays %s–%s", k.Rate, k.DelayMin, k.DelayMax),
			"≤ 20 ms, 0 early, 0 lost",
			fmt.Sprintf("%.2f ms (p50 %.2f, max %.2f); early %d; lost %d", float64(k.Lateness.P99), float64(k.Lateness.P50), float64(k.Lateness.Max), early, k.Lost),
			status(float64(k.Lateness.P99) <= 20 && early == 0 && k.Lost == 0))
		add("Kafka republisher vs a plain consume→produce forwarder", "≥ 0.7×",
			fmt.Sprintf("%.2f× (%s/s vs %s/s)", float64(k.Ratio), fmtRate(F(median(fs(k.Republisher)))), fmtRate(F(median(fs(k.Forwarder))))),
			status(float64(k.Ratio) >= 0.7))
	} else {
		add("Kafka republisher (kfake)", "p99 ≤ 20 ms, 0 early; ≥ 0.7× a forwarder", "-", statusNotMeas)
	}
	out = append(out, embeddedTargets(r)...)
	return append(out, manyTopicsTargets(r)...)
}

// carryOver fills the scenarios this run did not measure from the previous
// results.json under dir, and lists them in r.Carried, so that running one
// scenario does not erase the others from BENCHMARKS.md.
func carryOver(r *Report, dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "bench", "results.json"))
	if err != nil {
		return
	}
	var old Report
	if json.Unmarshal(b, &old) != nil {
		return
	}
	when := old.Started.UTC().Format("2006-01-02 15:04 UTC")
	carry := func(scenario string, have bool, copyOld func()) {
		if slices.Contains(r.Config.Scenarios, scenario) || !have {
			return
		}
		copyOld()
		// A scenario the previous report had carried itself keeps the date
		// of the run that measured it.
		label := scenario + " (run of " + when + ")"
		for _, c := range old.Carried {
			if strings.HasPrefix(c, scenario+" ") {
				label = c
			}
		}
		r.Carried = append(r.Carried, label)
	}
	carry(ScenarioRaw, old.Raw != nil, func() { r.Raw = old.Raw })
	carry(ScenarioThroughput, len(old.Throughput) > 0, func() { r.Throughput = old.Throughput })
	carry(ScenarioLateness, len(old.Lateness) > 0, func() { r.Lateness = old.Lateness })
	carry(ScenarioIdle, len(old.Idle) > 0, func() { r.Idle = old.Idle })
	carry(ScenarioMemory, len(old.Memory) > 0, func() { r.Memory = old.Memory })
	carry(ScenarioScale, len(old.Scale) > 0, func() { r.Scale = old.Scale })
	carry(ScenarioCrash, len(old.Crash) > 0, func() { r.Crash = old.Crash })
	carry(ScenarioKafka, old.Kafka != nil, func() { r.Kafka = old.Kafka })
	carry(ScenarioEmbedded, len(old.Embedded) > 0, func() { r.Embedded, r.Config.EmbeddedN = old.Embedded, old.Config.EmbeddedN })
	carry(ScenarioPublish, len(old.Publish) > 0, func() { r.Publish, r.Config.PublishFor = old.Publish, old.Config.PublishFor })
	carry(ScenarioHTTP, len(old.HTTP) > 0, func() {
		r.HTTP = old.HTTP
		r.Config.HTTPBaseline, r.Config.HTTPConcurrency, r.Config.HTTPFor = old.Config.HTTPBaseline, old.Config.HTTPConcurrency, old.Config.HTTPFor
	})
	carry(ScenarioManyTopics, old.ManyTopics != nil, func() {
		r.ManyTopics = old.ManyTopics
		r.Config.ManyTopicsCounts, r.Config.ManyTopicsIdleFor, r.Config.ManyTopicsLatenessTopics = old.Config.ManyTopicsCounts, old.Config.ManyTopicsIdleFor, old.Config.ManyTopicsLatenessTopics
	})
	// Systems of carried scenarios that this run did not open stay listed.
	for _, s := range old.Systems {
		if !slices.ContainsFunc(r.Systems, func(x sysSpec) bool { return x.Name == s.Name }) {
			r.Systems = append(r.Systems, s)
		}
	}
	if len(r.Carried) > 0 && r.Host.Redis == "" {
		r.Host.Redis = old.Host.Redis
	}
}

// carried reports whether scenario was taken from the previous results.
func carried(r *Report, scenario string) bool {
	return slices.ContainsFunc(r.Carried, func(c string) bool { return strings.HasPrefix(c, scenario+" ") })
}

// writeOutputs writes BENCHMARKS.md (replacing the generated part), the
// charts and results.json under dir.
// Retarget evaluates the targets of the results.json under dir again
// (after a change of the targets, not of the measurements) and rewrites
// it and the generated part of BENCHMARKS.md; the charts are kept as the
// run drew them (they need samples results.json does not hold).
func Retarget(dir string) (*Report, error) {
	chartDir := filepath.Join(dir, "bench")
	b, err := os.ReadFile(filepath.Join(chartDir, "results.json"))
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(chartDir, "results.json"), err)
	}
	r.Targets = evaluateTargets(&r)
	charts := map[string][]byte{}
	pngs, _ := filepath.Glob(filepath.Join(chartDir, "*.png"))
	for _, f := range pngs {
		charts[filepath.Base(f)] = nil // present: the document links it
	}
	if err := writeJSON(filepath.Join(chartDir, "results.json"), &r); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "BENCHMARKS.md")
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	md := spliceGenerated(string(old), Markdown(&r, "bench/", charts))
	return &r, os.WriteFile(path, []byte(md), 0o644)
}

func writeOutputs(r *Report, dir string) error {
	chartDir := filepath.Join(dir, "bench")
	if err := os.MkdirAll(chartDir, 0o755); err != nil {
		return err
	}
	charts := renderCharts(r)
	for name, body := range charts {
		if err := os.WriteFile(filepath.Join(chartDir, name), body, 0o644); err != nil {
			return err
		}
	}
	if err := writeJSON(filepath.Join(chartDir, "results.json"), r); err != nil {
		return err
	}
	path := filepath.Join(dir, "BENCHMARKS.md")
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	md := spliceGenerated(string(old), Markdown(r, "bench/", charts))
	return os.WriteFile(path, []byte(md), 0o644)
}

const (
	beginMarker = "<!-- BEGIN GENERATED by ontime-bench: do not edit between the markers -->"
	endMarker   = "<!-- END GENERATED -->"
)

// spliceGenerated replaces the text between the markers of old with gen,
// keeping the rest; without markers it returns a new document.
func spliceGenerated(old, gen string) string {
	block := beginMarker + "\n" + gen + endMarker + "\n"
	i := strings.Index(old, beginMarker)
	j := strings.Index(old, endMarker)
	if i < 0 || j < i {
		return "# ontime benchmarks\n\n" + block
	}
	return old[:i] + block + strings.TrimPrefix(old[j+len(endMarker):], "\n")
}

// e2eChart draws, per system, its end-to-end rate and its fire+ack rate.
func e2eChart(title string, results []ThroughputResult) []byte {
	var bars []bar
	for _, t := range results {
		col := colorFor(t.System)
		light := lighten(col)
		fireAck := nan
		if len(t.Median.Drain) > 0 {
			fireAck = t.Median.Drain[0]
		}
		bars = append(bars,
			bar{label: t.System, value: float64(t.Median.E2E), note: "e2e", color: &col, gap: len(bars) > 0},
			bar{value: float64(fireAck), note: "fire+ack", color: &light})
	}
	return barChart(title, "timers/s", bars, []legendItem{
		{"solid: end to end (publish N due now -> fire -> ack)", colText},
		{"light: fire+ack (N published before the workers start)", lighten(colText)},
	})
}

// renderCharts returns the PNG charts by file name.
func renderCharts(r *Report) map[string][]byte {
	out := map[string][]byte{}
	if len(r.Throughput) > 0 {
		out["throughput.png"] = e2eChart("Throughput per system (timers/s, median of runs)", r.Throughput)
		var bars []bar
		if r.Raw != nil && !isNaN(r.Raw.Median) {
			bars = append(bars, bar{label: "redis-benchmark", value: float64(r.Raw.Median), note: "ZADD/s"})
		}
		for _, t := range r.Throughput {
			if !isNaN(t.Median.PublishBatch) {
				bars = append(bars, bar{label: t.System, value: float64(t.Median.PublishBatch), note: "batched"})
			} else if !isNaN(t.Median.PublishSingle) {
				bars = append(bars, bar{label: t.System, value: float64(t.Median.PublishSingle), note: "one by one"})
			}
		}
		out["publish.png"] = barChart("Publish rate (timers/s, median) vs raw pipelined ZADD", "timers/s (redis-benchmark: ZADD ops/s)", bars, nil)
	}
	// A carried lateness scenario has no samples (results.json keeps the
	// summaries only): its chart is left as the run that measured it drew
	// it.
	if slices.ContainsFunc(r.Lateness, func(l LatenessResult) bool { return len(l.samples) > 0 }) {
		var ss []series
		for _, l := range r.Lateness {
			s := slices.Clone(l.samples)
			slices.Sort(s)
			ss = append(ss, series{name: l.System, sorted: s})
		}
		out["lateness.png"] = cdfChart(fmt.Sprintf("Lateness CDF at %d timers/s (all runs)", r.Config.Rate), ss)
	}
	if len(r.Scale) > 0 {
		var bars []bar
		for _, sc := range r.Scale {
			col := colorFor(sc.System)
			for _, sz := range sc.Sizes {
				bars = append(bars, bar{label: sc.System + " @" + fmtShort(float64(sz.Pending)), value: float64(sz.Claim.P99), note: "ms", color: &col})
			}
		}
		out["scale.png"] = barChart("Claim latency p99 by pending far-future timers", "claim p99, ms", bars, nil)
	}
	embeddedCharts(r, out)
	return out
}

func f2(v F) string {
	if isNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(v))
}

func f3(v F) string {
	if isNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(v))
}

func ratioStr(a, b F) string {
	if isNaN(a) || isNaN(b) || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

// Markdown renders the generated part of BENCHMARKS.md; chartPrefix is the
// charts' path relative to the document.
func Markdown(r *Report, chartPrefix string, charts map[string][]byte) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := r.Config
	p("_Generated %s by `%s` in %s._\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"), commandLine(r), r.Duration.Round(time.Second))
	p("Regenerate everything (this file, `bench/*.png`, `bench/results.json`) from the repository root:\n\n")
	p("```sh\ngo run ./bench/cmd/ontime-bench -out docs            # full run\ngo run ./bench/cmd/ontime-bench -quick -out /tmp/q   # a small check, about a minute\n```\n\n")
	p("Go benchmarks of the same scenarios (b.N counts timers; they skip when redis-server or PostgreSQL is missing): `cd bench && go test -run '^$' -bench 'E2E|PublishBatch' -benchtime 100000x ./harness` (E2E includes ontime-embedded and river-sqlite-tuned); `-bench Lateness -benchtime 8000x`; `-bench 'Idle|Memory'` (idle time from ONTIME_BENCH_IDLE, default 5s); `ONTIME_BENCH_SCALE=10k,1M,10M` with `-bench ClaimScale -benchtime 2000x`.\n\n")

	p("## Method\n\n")
	h := r.Host
	p("- **Machine**: %s, %d CPUs as seen by Go (`/proc/cpuinfo`), %s RAM, %s; load average %s at the start, %s at the end. The machine is shared: every number is compared only with numbers measured in the same run.\n", h.CPUModel, h.NumCPU, h.MemTotal, h.OS, h.LoadStart, h.LoadEnd)
	p("- **Software**: %s; redis-server %s (started by the harness on a free loopback port, persistence off); ", h.Go, h.Redis)
	if h.Postgres != "" {
		p("%s (initdb in a temporary directory, free loopback port, fsync/synchronous_commit/full_page_writes off).\n", h.Postgres)
	} else {
		p("no PostgreSQL in this run.\n")
	}
	p("- **Everything runs on one machine**: the harness (publishers, workers, handlers), Redis and PostgreSQL share the CPUs.\n")
	p("- **Sizes**: N = %d timers per throughput phase for ontime and the pipeline baseline, %d for asynq and river; W = %d concurrent handlers per system; %d publishing goroutines; batches of %d; bodies of %d bytes; %d runs per measurement, tables show medians.\n",
		c.N, c.PeerN, c.W, c.Publishers, c.Batch, c.BodySize, c.Runs)
	p("- **Done** means the handler ran (first delivery recorded) *and* the system no longer reports the timer pending (acked/deleted/completed), checked every 2 ms with the system's own count (ontime `Count`, asynq `Inspector.GetQueueInfo`, river `SELECT count(*)`). End to end is timed from the first publish call, with workers already running, to that moment. Fire+ack is timed from the first delivery to that moment, on timers published before the workers started.\n")
	p("- **Handlers** return at once (success). **Round trips** are counted on the client (one per command, pipeline, script call, SQL statement or batch); Redis commands per timer come from `INFO commandstats` and include the commands scripts run; both leave out the harness's own pending checks. Redis CPU per timer is the growth of `INFO cpu` used_cpu_user+used_cpu_sys over the phase divided by N (it includes the harness's pending checks, a few hundred cheap calls).\n")
	p("- **Lateness**: R = %d timers/s for %s, one timer per publish call from %d goroutines, each due a uniform random %s–%s after its publish; lateness = the handler's clock reading minus the due time (same machine, same clock). Negative = fired early, a defect.\n", c.Rate, c.LatenessFor, c.Publishers, c.DelayMin, c.DelayMax)
	p("- **Idle**: workers on %d fresh queues per system sit idle for %s, then each queue gets one timer due %s later.\n", c.Runs, c.Idle, c.IdleDelay)
	p("- **Memory**: `INFO memory` used_memory after publishing %d timers due in a day, minus before, on an emptied Redis, divided by the count.\n", c.MemoryTimers)
	p("- **Scale**: one topic grows to each size in turn with far-future timers (distinct due times, one millisecond apart; loaded by a server-side Lua script that clones one timer published through the driver into the layout's exact keys and record format, since the publish path is measured elsewhere); at each size, %d rounds of %d times: publish one due timer, then time one `Claim` (driver call, one script) that takes it, and ack it; the table shows the round whose p99 is the median of the rounds' p99s (all of them in the last column). The scale target is about the native layout; the compatible layout runs the sizes up to %s.\n", max(c.Runs, 1), c.ScaleClaims, compatMaxStr(c.ScaleCompatMax))
	p("- **Crash**: %d timers due now; a worker subprocess with lease %s handles about half (each handler sleeps 2 ms), is killed with SIGKILL, and a new worker gets %s to finish the rest.\n", c.CrashTimers, c.CrashLease, c.CrashWait)
	p("%s\n", embeddedMethod(r)+manyTopicsMethod(r))
	p("Systems:\n\n| system | store | settings |\n|---|---|---|\n")
	for _, s := range r.Systems {
		p("| %s | %s | %s |\n", s.Name, s.Store, s.Settings)
	}
	p("\n")

	p("## Targets (DESIGN.md)\n\n| target | goal | measured | status |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		mark := "❌ " + t.Status
		switch t.Status {
		case statusMet:
			mark = "✅ met"
		case statusNotMeas:
			mark = "— not measured"
		}
		p("| %s | %s | %s | %s |\n", t.What, t.Goal, t.Measured, mark)
	}
	p("\n")

	if len(r.Throughput) > 0 || r.Raw != nil {
		p("## Throughput\n\n")
		if r.Raw != nil {
			p("Physical limit, same Redis, same run: `%s` → **%s ZADD/s** (median of %d).\n\n", r.Raw.Command, fmtRate(r.Raw.Median), len(r.Raw.Runs))
		}
		on := r.throughputOf("ontime")
		p("| system | N | publish 1-by-1 /s | publish batched /s | batched vs raw ZADD | fire+ack /s | **end to end /s** | e2e: ontime is × | round trips/timer (publish 1 / batch / work) | Redis command calls/timer (publish / work; a variadic call counts once) | Redis CPU µs/timer (batched publish / work) | busiest commands in work, per timer | redelivered |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, t := range r.Throughput {
			if t.Err != "" && len(t.Runs) == 0 {
				p("| %s | %d | error: %s ||||||||||| |\n", t.System, t.N, oneLine(t.Err))
				continue
			}
			m := t.Median
			vsRaw := "-"
			if r.Raw != nil {
				pb := m.PublishBatch
				if isNaN(pb) {
					pb = m.PublishSingle
				}
				if !isNaN(pb) && r.Raw.Median > 0 {
					vsRaw = fmt.Sprintf("%.0f %%", 100*float64(pb)/float64(r.Raw.Median))
				}
			}
			onX := "-"
			if on != nil {
				onX = ratioStr(on.Median.E2E, m.E2E)
			}
			cmdPub := m.CmdPublishBatch
			if isNaN(cmdPub) {
				cmdPub = m.CmdPublishSingle
			}
			p("| %s | %d | %s | %s | %s | %s | **%s** | %s | %s / %s / %s | %s / %s | %s / %s | %s | %d |\n",
				t.System, t.N, fmtRate(m.PublishSingle), fmtRate(m.PublishBatch), vsRaw, fmtRate(m.Drain[0]), fmtRate(m.E2E), onX,
				f2(m.RTPublishSingle), f2(m.RTPublishBatch), f2(m.RTWork), f2(cmdPub), f2(m.CmdWork), f2(m.RedisCPUPublishBatch), f2(m.RedisCPUWork), m.CmdWorkTop, m.Redelivered)
		}
		p("\n\"-\" in the publish columns of a `-tuned` variant: it differs only on the worker side, so its publish rate is not measured again. asynq has no batch publish.\n\n")
		if _, ok := charts["throughput.png"]; ok {
			p("![end-to-end throughput](%sthroughput.png)\n\n![publish rate](%spublish.png)\n\n", chartPrefix, chartPrefix)
		}
	}

	if len(r.Lateness) > 0 {
		p("## Lateness at %d timers/s\n\n", c.Rate)
		onL := r.latenessOf("ontime")
		p("| system | delivered | p50 ms | p90 ms | p99 ms | max ms | p99 vs ontime | fired early | earliest by ms | publish rate /s |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, l := range r.Lateness {
			if len(l.Runs) == 0 {
				p("| %s | error: %s ||||||||| \n", l.System, oneLine(l.Err))
				continue
			}
			m := l.Median
			vs := "-"
			if onL != nil {
				vs = ratioStr(m.P99, onL.Median.P99)
			}
			rates := make([]float64, len(l.Runs))
			lost := 0
			for i, run := range l.Runs {
				rates[i] = float64(run.Rate)
				lost += run.Lost
			}
			p("| %s | %d (lost %d) | %s | %s | %s | %s | %s | %.2f %% | %s | %.0f |\n", l.System, m.Count, lost, f2(m.P50), f2(m.P90), f2(m.P99), f2(m.Max), vs,
				100*float64(m.EarlyShare), f2(m.EarlyMax), median(rates))
		}
		p("\n")
		if _, ok := charts["lateness.png"]; ok || carried(r, ScenarioLateness) {
			p("![lateness CDF](%slateness.png)\n\n", chartPrefix)
		}
	}

	if len(r.Idle) > 0 {
		p("## First timer on a queue idle for %s\n\n| system | lateness per queue, ms | median ms | worst ms |\n|---|---|---|---|\n", c.Idle)
		for _, id := range r.Idle {
			var parts []string
			for _, v := range id.Samples {
				parts = append(parts, f2(v))
			}
			errS := ""
			if id.Err != "" {
				errS = " (error: " + oneLine(id.Err) + ")"
			}
			p("| %s | %s%s | %s | %s |\n", id.System, strings.Join(parts, ", "), errS, f2(id.Median), f2(id.Max))
		}
		p("\n")
	}

	if len(r.Memory) > 0 {
		p("## Redis memory per pending timer\n\n| system | body | bytes per timer | vs ontime-compat | runs |\n|---|---|---|---|---|\n")
		for _, m := range r.Memory {
			vs := "-"
			if cm := r.memoryOf("ontime-compat", m.BodySize); cm != nil {
				vs = ratioStr(m.Median, cm.Median)
			}
			var runs []string
			for _, v := range m.Runs {
				runs = append(runs, fmt.Sprintf("%.0f", float64(v)))
			}
			p("| %s | %d B | %.0f | %s | %s |\n", m.System, m.BodySize, float64(m.Median), vs, strings.Join(runs, ", "))
		}
		p("\n")
	}

	if len(r.Scale) > 0 {
		p("## Scale: claim latency by pending timers\n\n| system | pending | claims | p50 ms | p90 ms | p99 ms | max ms | p99 vs smallest | load rate /s | used_memory | p99 of each round ms |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, sc := range r.Scale {
			if sc.Err != "" {
				p("| %s | error: %s ||||||||| |\n", sc.System, oneLine(sc.Err))
			}
			for _, sz := range sc.Sizes {
				rounds := make([]string, len(sz.RoundsP99))
				for i, v := range sz.RoundsP99 {
					rounds[i] = f3(v)
				}
				p("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %d MiB | %s |\n", sc.System, fmtShort(float64(sz.Pending)), sz.Claims,
					f3(sz.Claim.P50), f3(sz.Claim.P90), f3(sz.Claim.P99), f3(sz.Claim.Max), ratioStr(sz.Claim.P99, sc.Sizes[0].Claim.P99), fmtRate(sz.LoadRate), sz.UsedMemory>>20, strings.Join(rounds, ", "))
			}
		}
		p("\n")
		if _, ok := charts["scale.png"]; ok {
			p("![claim p99 by pending timers](%sscale.png)\n\n", chartPrefix)
		}
	}

	if len(r.Crash) > 0 {
		p("## Crash: SIGKILL a worker mid-batch\n\n| system | timers | handled before the kill | redelivered | not handled within %s of the kill | all done after the kill | lease |\n|---|---|---|---|---|---|---|\n", c.CrashWait)
		for _, cr := range r.Crash {
			if cr.Err != "" {
				p("| %s | %d | error: %s |||| |\n", cr.System, cr.Timers, oneLine(cr.Err))
				continue
			}
			p("| %s | %d | %d | %d | %d | %s s | %s |\n", cr.System, cr.Timers, cr.HandledBeforeKill, cr.Redelivered, cr.Lost, f2(cr.Recovery), cr.Lease)
		}
		p("\n")
	}

	if k := r.Kafka; k != nil {
		p("## Kafka delay topics (kfake)\n\n")
		p("An in-process kfake cluster (%d brokers on loopback TCP, %d partitions per topic) in the harness's process, the republisher with its defaults and the recommended ladder (1s, 5s, 15s, 1m, ...).\n\n", k.Brokers, k.Partitions)
		if k.Err != "" {
			p("Error: %s\n\n", oneLine(k.Err))
		}
		if len(k.Republisher) > 0 {
			p("**Throughput**: %d records already due in the smallest bucket, timed from the group assignment to the last acknowledged produce; the baseline is a plain consumer-group forwarder of the same bucket topics on the same cluster (poll, produce each record with the same idempotent acks=all producer, wait for the acks, commit).\n\n", k.N)
			p("| | records/s per run | median |\n|---|---|---|\n")
			row := func(name string, xs []F) {
				var parts []string
				for _, x := range xs {
					parts = append(parts, fmtRate(x))
				}
				p("| %s | %s | %s |\n", name, strings.Join(parts, ", "), fmtRate(F(median(fs(xs)))))
			}
			row("republisher", k.Republisher)
			row("forwarder", k.Forwarder)
			p("\nRatio of the medians: **%.2f×**.\n\n", float64(k.Ratio))
		}
		if k.Lateness.Count > 0 {
			p("**Lateness** at %d records/s for %s, delays uniform in %s–%s, one republisher (no rebalance after the start); receive instant at a destination consumer minus the due instant:\n\n", k.Rate, k.For, k.DelayMin, k.DelayMax)
			p("| measured at | records | p50 ms | p90 ms | p99 ms | max ms | early | lost |\n|---|---|---|---|---|---|---|---|\n")
			l, pl := k.Lateness, k.ProduceLateness
			p("| destination consumer | %d | %s | %s | %s | %s | %.0f | %d |\n", l.Count, f2(l.P50), f2(l.P90), f2(l.P99), f2(l.Max), float64(l.EarlyShare)*float64(l.Count), k.Lost)
			p("| republisher's produce call | %d | %s | %s | %s | %s | %d | - |\n\n", pl.Count, f2(pl.P50), f2(pl.P90), f2(pl.P99), f2(pl.Max), k.ReleasedEarly)
		}
		if k.MemoryPerRecord > 0 {
			p("**Memory**: %d records with %d-byte values held in memory by the republisher (due in 45 s, in a 60 s bucket): Go heap growth **%.0f bytes per in-flight record** (franz-go's record and fetch buffers included).\n\n", k.MemoryRecords, c.BodySize, float64(k.MemoryPerRecord))
		}
	}

	b.WriteString(embeddedMarkdown(r, chartPrefix, charts))
	b.WriteString(manyTopicsMarkdown(r))

	if len(r.Carried) > 0 {
		p("Not run this time, taken from the previous `results.json`: %s.\n\n", strings.Join(r.Carried, "; "))
	}

	if len(r.Errors) > 0 {
		p("## Errors in this run\n\n")
		for _, e := range r.Errors {
			p("- %s\n", oneLine(e))
		}
		p("\n")
	}
	return b.String()
}

func commandLine(r *Report) string {
	if r.Command == "" {
		return "ontime-bench"
	}
	f := strings.Fields(r.Command)
	if len(f) > 0 {
		f[0] = filepath.Base(f[0])
	}
	return strings.Join(f, " ")
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Summary is a short plain-text account of a report: the targets and the
// headline numbers.
func Summary(r *Report) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ontime-bench: %s, %s, Redis %s, %s\n", r.Host.CPUModel, r.Host.Go, r.Host.Redis, r.Duration.Round(time.Second))
	if r.Raw != nil {
		fmt.Fprintf(&b, "  redis-benchmark -P 16 ZADD: %s/s\n", fmtRate(r.Raw.Median))
	}
	for _, t := range r.Throughput {
		fmt.Fprintf(&b, "  throughput %-14s e2e %8s/s  publish batch %8s/s  single %8s/s  fire+ack %8s/s\n", t.System,
			fmtRate(t.Median.E2E), fmtRate(t.Median.PublishBatch), fmtRate(t.Median.PublishSingle), fmtRate(t.Median.Drain[0]))
	}
	for _, l := range r.Lateness {
		fmt.Fprintf(&b, "  lateness   %-14s p50 %s ms  p99 %s ms  max %s ms  early %.2f %%\n", l.System, f2(l.Median.P50), f2(l.Median.P99), f2(l.Median.Max), 100*float64(l.Median.EarlyShare))
	}
	for _, id := range r.Idle {
		fmt.Fprintf(&b, "  idle       %-14s worst %s ms\n", id.System, f2(id.Max))
	}
	for _, m := range r.Memory {
		fmt.Fprintf(&b, "  memory     %-14s %4d B body: %.0f B/timer\n", m.System, m.BodySize, float64(m.Median))
	}
	for _, sc := range r.Scale {
		for _, sz := range sc.Sizes {
			fmt.Fprintf(&b, "  scale      %-14s %9d pending: claim p99 %s ms\n", sc.System, sz.Pending, f3(sz.Claim.P99))
		}
	}
	for _, cr := range r.Crash {
		fmt.Fprintf(&b, "  crash      %-14s redelivered %d lost %d\n", cr.System, cr.Redelivered, cr.Lost)
	}
	for _, t := range r.Embedded {
		fmt.Fprintf(&b, "  embedded   %-18s e2e %8s/s  publish batch %8s/s  fire+ack %8s/s\n", t.System, fmtRate(t.Median.E2E), fmtRate(t.Median.PublishBatch), fmtRate(t.Median.Drain[0]))
	}
	for _, pr := range r.Publish {
		fmt.Fprintf(&b, "  publish    %-22s %s\n", pr.System, fmtPublishRates(pr.Median))
	}
	for _, h := range r.HTTP {
		fmt.Fprintf(&b, "  http       %-8s %-16s %8s req/s  p99 %s ms", h.Store, h.Build, fmtRate(h.Median.PerSecond), f2(h.Median.P99))
		if d := h.Median.DeliveredPerSecond; d > 0 {
			fmt.Fprintf(&b, "  delivered end to end %8s/s", fmtRate(d))
		}
		b.WriteString("\n")
	}
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "  target [%s] %s (%s): %s\n", t.Status, t.What, t.Goal, t.Measured)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "  error: %s\n", oneLine(e))
	}
	return b.String()
}

func compatMaxStr(m int) string {
	if m <= 0 {
		return "the largest"
	}
	return fmtShort(float64(m))
}
