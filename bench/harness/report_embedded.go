package harness

import (
	"fmt"
	"slices"
	"strings"
)

// This file renders the scenarios of issue 13's embedded-store and publish
// work (embedded, publish, http): their targets, tables and charts. Each
// scenario keeps its own results in Report and its own functions here, so
// a later scenario adds a file like this one.

// embeddedOf returns a system's result in the embedded scenario.
func (r *Report) embeddedOf(name string) *ThroughputResult {
	return measuredThroughput(r.Embedded, name)
}

func (r *Report) publishOf(name string) *PublishResult {
	return first(r.Publish, func(x *PublishResult) bool { return x.System == name && len(x.Runs) > 0 })
}

func (r *Report) httpOf(store, build string) *HTTPResult {
	return first(r.HTTP, func(x *HTTPResult) bool { return x.Store == store && x.Build == build && len(x.Runs) > 0 })
}

// embeddedTargets evaluates the targets of the embedded, publish and http
// scenarios.
func embeddedTargets(r *Report) []Target {
	var out []Target
	add := func(what, goal, measured, st string) {
		out = append(out, Target{What: what, Goal: goal, Measured: measured, Status: st})
	}
	// Embedded store.
	if e := r.embeddedOf("ontime-embedded"); e != nil && !isNaN(e.Median.E2E) {
		v := float64(e.Median.E2E)
		add(fmt.Sprintf("embedded store end to end (fsync on, N=%s, W=%d)", fmtShort(float64(e.N)), r.Config.W), "≥ 40k/s",
			fmtRate(e.Median.E2E)+"/s", status(v >= 40000))
		var best *ThroughputResult
		for _, name := range []string{"river-sqlite", "river-sqlite-tuned"} {
			if x := r.embeddedOf(name); x != nil && !isNaN(x.Median.E2E) && (best == nil || x.Median.E2E > best.Median.E2E) {
				best = x
			}
		}
		if best != nil {
			ratio := v / float64(best.Median.E2E)
			add("embedded store vs River on SQLite (end to end, same N and W)", "≥ 3× the faster River variant",
				fmt.Sprintf("%.1f× (%s/s vs %s/s, %s)", ratio, fmtRate(e.Median.E2E), fmtRate(best.Median.E2E), best.System), status(ratio >= 3))
		} else {
			add("embedded store vs River on SQLite", "≥ 3×", "-", statusNotMeas)
		}
	} else if slices.Contains(r.Config.Scenarios, ScenarioEmbedded) || len(r.Embedded) > 0 {
		add("embedded store end to end (fsync on)", "≥ 40k/s; ≥ 3× River on SQLite", "-", statusNotMeas)
	}
	// One-by-one publish.
	for _, sys := range []struct{ name, direct, label string }{
		{"ontime", "ontime-direct", "Redis"},
		{"ontime-embedded", "ontime-embedded-direct", "embedded"},
	} {
		p, d := r.publishOf(sys.name), r.publishOf(sys.direct)
		if p == nil || d == nil {
			continue
		}
		at16, d16 := float64(p.Median[16]), float64(d.Median[16])
		if d16 > 0 {
			ratio := at16 / d16
			add(fmt.Sprintf("one-by-one publish, 16 callers, library on %s, vs one store call per publish", sys.label), "≥ 2.5×",
				fmt.Sprintf("%.2f× (%s/s vs %s/s); 64 callers %.2f×", ratio, fmtRate(p.Median[16]), fmtRate(d.Median[16]),
					float64(p.Median[64])/float64(d.Median[64])), status(ratio >= 2.5))
		}
		if one := float64(p.Median[1]); one > 0 && sys.name == "ontime" {
			ratio := at16 / one
			add("one-by-one publish, 16 callers vs 1 caller (DESIGN.md, library on Redis)", "≥ 2.5× the single-call rate",
				fmt.Sprintf("%.2f× (%s/s vs %s/s)", ratio, fmtRate(p.Median[16]), fmtRate(p.Median[1])), status(ratio >= 2.5))
		}
	}
	// HTTP.
	if base := r.Config.HTTPBaseline; base != "" {
		for _, store := range []string{"redis", "embedded"} {
			n, o := r.httpOf(store, "ontime"), r.httpOf(store, "ontime@"+base)
			if n == nil || o == nil || o.Median.PerSecond == 0 {
				continue
			}
			ratio := float64(n.Median.PerSecond) / float64(o.Median.PerSecond)
			add(fmt.Sprintf("HTTP publish, %d connections, %s store, vs ontime@%s", r.Config.HTTPConcurrency, store, base), "≥ 2×",
				fmt.Sprintf("%.2f× (%s vs %s req/s)", ratio, fmtRate(n.Median.PerSecond), fmtRate(o.Median.PerSecond)), status(ratio >= 2))
		}
	}
	return out
}

// embeddedMethod is the method text of the embedded, publish and http
// scenarios.
func embeddedMethod(r *Report) string {
	c := r.Config
	var b strings.Builder
	if len(r.Embedded) > 0 {
		fmt.Fprintf(&b, "- **Embedded stores**: the throughput phases above (publish one by one from %d goroutines and in batches of %d, fire+ack, end to end with the workers running) with N = %d for every system and W = %d; files on the local disk (ext4 here; `ONTIME_BENCH_DIR` chooses), fsync on: ontimebolt fsyncs every commit, SQLite runs WAL with synchronous=FULL (the WAL is fsynced at every commit). Done = handled and no longer pending by the system's own count.\n",
			c.Publishers, c.Batch, c.EmbeddedN, c.W)
	}
	if len(r.Publish) > 0 {
		fmt.Fprintf(&b, "- **One-by-one publish**: `Client.Publish` (one timer per call, due in an hour, no workers) from 1, 16 and 64 goroutines for %s each, on a fresh topic and store; the `-direct` baselines publish the same timers with one driver `Schedule` call each (encoded as Publish encodes them): what Publish did before it coalesced concurrent calls.\n", c.PublishFor)
	}
	if len(r.HTTP) > 0 {
		base := "no baseline build"
		if c.HTTPBaseline != "" {
			base = "and, in the same runs, `ontime` built from commit `" + c.HTTPBaseline + "` (git archive of that commit, go build)"
		}
		fmt.Fprintf(&b, "- **HTTP publish**: `ontime serve --log-level warn` (built from this tree with go build) on the harness's Redis and on the embedded store (a fresh data directory per run), %s; load from `ontime bench-api --concurrency %d --duration %s` of this tree, for every build (separate process; its own HTTP/1.1 client on keep-alive connections, one request per connection at a time, 100-byte bodies, `\"delay\": \"1h\"`). Server and load generator share the CPUs.\n", base, c.HTTPConcurrency, c.HTTPFor)
	}
	return b.String()
}

// embeddedMarkdown renders the tables of the embedded, publish and http
// scenarios.
func embeddedMarkdown(r *Report, chartPrefix string, charts map[string][]byte) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	if len(r.Embedded) > 0 {
		p("## Embedded stores: ontime (bbolt) and River on SQLite\n\n")
		on := r.embeddedOf("ontime-embedded")
		p("| system | N | publish 1-by-1 /s | publish batched /s | fire+ack /s | **end to end /s** | e2e: ontime-embedded is × | e2e per run | redelivered |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, t := range r.Embedded {
			if t.Err != "" && len(t.Runs) == 0 {
				p("| %s | %d | error: %s |||||| |\n", t.System, t.N, oneLine(t.Err))
				continue
			}
			m := t.Median
			onX := "-"
			if on != nil {
				onX = ratioStr(on.Median.E2E, m.E2E)
			}
			var runs []string
			for _, x := range t.Runs {
				runs = append(runs, fmtRate(x.E2E))
			}
			p("| %s | %d | %s | %s | %s | **%s** | %s | %s | %d |\n", t.System, t.N, fmtRate(m.PublishSingle), fmtRate(m.PublishBatch),
				fmtRate(m.Drain[0]), fmtRate(m.E2E), onX, strings.Join(runs, ", "), m.Redelivered)
		}
		p("\n")
		if _, ok := charts["embedded.png"]; ok {
			p("![embedded stores end to end](%sembedded.png)\n\n", chartPrefix)
		}
	}
	if len(r.Publish) > 0 {
		p("## One-by-one publish by concurrent callers\n\n")
		p("| system | store | 1 caller /s | 16 callers /s | 64 callers /s | 16 ÷ 1 | 64 ÷ 1 | 16 callers vs -direct | runs (1 / 16 / 64) |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, pr := range r.Publish {
			if len(pr.Runs) == 0 {
				p("| %s | | error: %s |||||| |\n", pr.System, oneLine(pr.Err))
				continue
			}
			store := ""
			for _, s := range r.Systems {
				if s.Name == pr.System {
					store = s.Store
				}
			}
			vs := "-"
			if !strings.HasSuffix(pr.System, "-direct") {
				if d := r.publishOf(pr.System + "-direct"); d != nil {
					vs = ratioStr(pr.Median[16], d.Median[16])
				}
			}
			var runs []string
			for _, x := range pr.Runs {
				runs = append(runs, fmt.Sprintf("%s / %s / %s", fmtRate(x.Rates[1]), fmtRate(x.Rates[16]), fmtRate(x.Rates[64])))
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", pr.System, store, fmtRate(pr.Median[1]), fmtRate(pr.Median[16]), fmtRate(pr.Median[64]),
				ratioStr(pr.Median[16], pr.Median[1]), ratioStr(pr.Median[64], pr.Median[1]), vs, strings.Join(runs, "; "))
		}
		p("\n")
		if _, ok := charts["publish_callers.png"]; ok {
			p("![one-by-one publish by callers](%spublish_callers.png)\n\n", chartPrefix)
		}
	}
	if len(r.HTTP) > 0 {
		p("## HTTP publish (`ontime serve`, %d connections)\n\n", r.Config.HTTPConcurrency)
		p("| store | build | requests/s per run | median requests/s | p50 ms | p99 ms | vs baseline build | CPU µs per request: server / load generator / redis-server | CPU cores busy |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, h := range r.HTTP {
			if len(h.Runs) == 0 {
				p("| %s | %s | error: %s |||| |\n", h.Store, h.Build, oneLine(h.Err))
				continue
			}
			vs := "-"
			if base := r.Config.HTTPBaseline; base != "" && h.Build == "ontime" {
				if o := r.httpOf(h.Store, "ontime@"+base); o != nil {
					vs = ratioStr(h.Median.PerSecond, o.Median.PerSecond)
				}
			}
			var runs []string
			for _, x := range h.Runs {
				runs = append(runs, fmtRate(x.PerSecond))
			}
			m := h.Median
			busy := "-"
			tot := float64(m.ServerCPU) + float64(m.LoadgenCPU)
			if h.Store == "redis" {
				tot += float64(m.RedisCPU)
			}
			if !isNaN(F(tot)) {
				busy = fmt.Sprintf("%.2f", tot*float64(m.PerSecond)/1e6)
			}
			p("| %s | %s | %s | %s | %s | %s | %s | %s / %s / %s | %s |\n", h.Store, h.Build, strings.Join(runs, ", "), fmtRate(m.PerSecond), f2(m.P50), f2(m.P99), vs,
				f2(m.ServerCPU), f2(m.LoadgenCPU), f2(m.RedisCPU), busy)
		}
		p("\n")
	}
	return b.String()
}

// embeddedCharts draws the charts of the embedded and publish scenarios.
func embeddedCharts(r *Report, out map[string][]byte) {
	if len(r.Embedded) > 0 {
		out["embedded.png"] = e2eChart("Embedded stores, fsync on (timers/s, median of runs)", r.Embedded)
	}
	if len(r.Publish) > 0 {
		var bars []bar
		for _, pr := range r.Publish {
			base, direct := strings.CutSuffix(pr.System, "-direct")
			col := colorFor(base)
			if direct {
				col = lighten(col)
			}
			for i, c := range PublishCallers {
				label := fmt.Sprintf("×%d", c)
				if i == 0 {
					label = strings.TrimPrefix(pr.System, "ontime-") + " " + label
				}
				bars = append(bars, bar{label: label, value: float64(pr.Median[c]), note: "/s", color: &col, gap: i == 0 && len(bars) > 0})
			}
		}
		out["publish_callers.png"] = barChart("ontime one-by-one Publish: timers/s by concurrent callers (median)", "timers/s", bars, []legendItem{
			{"light (-direct): one store call per timer, as Publish did before coalescing", lighten(colText)},
		})
	}
}
