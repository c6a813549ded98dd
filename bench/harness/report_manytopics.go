package harness

import (
	"fmt"
	"strings"
)

// manyTopicsTargets evaluates the many-topics targets: 100,000 idle topics
// cost at most 2 % of a core (server and Redis together); lateness p99 at
// Rate timers/s over many topics within 1.2× of the same load on one.
func manyTopicsTargets(r *Report) []Target {
	m := r.ManyTopics
	if m == nil {
		return nil
	}
	var out []Target
	for _, i := range m.Idle {
		if i.Topics != 100000 {
			continue
		}
		if i.Err != "" || isNaN(i.ServerPct) || isNaN(i.RedisPct) {
			out = append(out, Target{What: "100,000 idle topics, `ontime serve` + Redis CPU", Goal: "≤ 2 % of a core", Measured: "-", Status: statusNotMeas})
			continue
		}
		tot := float64(i.ServerPct + i.RedisPct)
		out = append(out, Target{What: "100,000 idle topics, `ontime serve` + Redis CPU", Goal: "≤ 2 % of a core",
			Measured: fmt.Sprintf("%.2f %% (server %.2f %%, redis-server %.2f %%)", tot, i.ServerPct, i.RedisPct), Status: status(tot <= 2)})
	}
	var one, many *ManyTopicsLateness
	for k := range m.Lateness {
		l := &m.Lateness[k]
		if len(l.Runs) == 0 {
			continue
		}
		if l.Topics == 1 {
			one = l
		} else {
			many = l
		}
	}
	if one != nil && many != nil {
		ratio := float64(many.Median.P99) / float64(one.Median.P99)
		out = append(out, Target{
			What:     fmt.Sprintf("lateness p99 at %d timers/s over %s topics vs one topic", r.Config.Rate, fmtShort(float64(many.Topics))),
			Goal:     "≤ 1.2×",
			Measured: fmt.Sprintf("%.2f× (%.2f ms vs %.2f ms)", ratio, many.Median.P99, one.Median.P99),
			Status:   status(ratio <= 1.2),
		})
		early := many.Median.EarlyShare + one.Median.EarlyShare
		out = append(out, Target{What: "many topics: timers fired early", Goal: "0", Measured: fmt.Sprintf("%.2f %%", 100*early), Status: status(early == 0)})
	}
	return out
}

// manyTopicsMethod is the method text of the many-topics scenario.
func manyTopicsMethod(r *Report) string {
	if r.ManyTopics == nil {
		return ""
	}
	c := r.Config
	return fmt.Sprintf("- **Many topics**: idle cost: %v topics filled with one timer each, due in a day, on the harness's Redis (native layout); then `ontime serve --redis-prefix …` (built from this tree; serve_topics `*`, so one worker serves every topic from the topic index) runs, and after 5 s of start-up the CPU time of the server process (/proc) and of redis-server (`INFO cpu`) is measured over %s, as %% of one core. Lateness: %d timers/s for %s, each due %s–%s after its publish (one `Publish` with `At` per timer, %d publishers), spread round-robin over %d topics and served by one `HandleTopics(\"t-*\")` worker (per-topic defaults), next to the same load on one topic served by `Handle` with MaxConcurrency %d; fire minus due on the same host clock.\n",
		c.ManyTopicsCounts, c.ManyTopicsIdleFor, c.Rate, c.LatenessFor, c.DelayMin, c.DelayMax, c.Publishers, c.ManyTopicsLatenessTopics, c.W)
}

// manyTopicsMarkdown renders the many-topics tables.
func manyTopicsMarkdown(r *Report) string {
	m := r.ManyTopics
	if m == nil {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## Many topics\n\n")
	p("Idle `ontime serve`, one far-future timer per topic:\n\n| topics | server CPU, %% of a core | redis-server CPU, %% of a core | together |\n|---|---|---|---|\n")
	for _, i := range m.Idle {
		if i.Err != "" {
			p("| %d | error: %s | | |\n", i.Topics, oneLine(i.Err))
			continue
		}
		p("| %d | %.2f | %.2f | **%.2f** |\n", i.Topics, i.ServerPct, i.RedisPct, i.ServerPct+i.RedisPct)
	}
	p("\nLateness at %d timers/s (ms, medians of %d runs):\n\n| topics | served by | p50 | p90 | p99 | max | early | lost |\n|---|---|---|---|---|---|---|---|\n", r.Config.Rate, r.Config.Runs)
	for _, l := range m.Lateness {
		if len(l.Runs) == 0 {
			p("| %d | %s | error: %s ||||||\n", l.Topics, l.How, oneLine(l.Err))
			continue
		}
		lost := 0
		for _, x := range l.Runs {
			lost += x.Lost
		}
		s := l.Median
		p("| %d | `%s` | %.2f | %.2f | **%.2f** | %.1f | %.2f %% | %d |\n", l.Topics, l.How, s.P50, s.P90, s.P99, s.Max, 100*s.EarlyShare, lost)
	}
	p("\n")
	return b.String()
}
