package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ontime-go/ontime/internal/wait"
)

// scrape GETs /metrics of s with token and parses the answer with the
// Prometheus text parser.
func scrape(t *testing.T, s *srv, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	return scrapeURL(t, s.URL+"/metrics", token)
}

// scrapeURL GETs url with token and parses the answer with the Prometheus
// text parser.
func scrapeURL(t *testing.T, url, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("/metrics Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return resp.StatusCode, mfs
}

// sample returns the value of name{labels} in mfs (a counter's or gauge's
// value, a histogram's sample count), or -1.
func sample(mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	mf := mfs[name]
	if mf == nil {
		return -1
	}
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if got[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			return m.GetUntyped().GetValue()
		}
	}
	return -1
}

// testMetrics scrapes /metrics of a running server (behind its bearer
// token) while it delivers timers, and checks the ontime metrics, the Go
// and process collectors, docs/observability.md and the Grafana dashboard
// against what it serves.
func testMetrics(t *testing.T, b *backend) {
	const token = "metrics-secret"
	s := serve(t, nil, b.storeArgs(t, "--metrics-sample-interval", "100ms", "--tokens", token)...)
	a := newAPI(t, s)
	a.token = token
	if code, _ := scrape(t, s, ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d, want 401", code)
	}
	a.must(201, "POST", "/v1/topics/jobs/timers", map[string]any{"id": "now-1", "body": "a", "delay": "0s"})
	a.must(201, "POST", "/v1/topics/jobs/timers", map[string]any{"id": "now-2", "body": "b", "delay": "0s"})
	a.must(201, "POST", "/v1/topics/jobs/timers", map[string]any{"id": "later", "body": "c", "at": time.Now().Add(time.Hour).Format(time.RFC3339)})

	var mfs map[string]*dto.MetricFamily
	// The acked counter moves when the handler's outcome is decided, the
	// handler's duration just after it (a scrape can fall between), the
	// sampled timer gauges once the store has applied the outcome and the
	// sampler (every 100 ms) has counted since: wait for all of them.
	ready := func() bool {
		var code int
		code, mfs = scrape(t, s, token)
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		return sample(mfs, "ontime_deliveries_total", "topic", "jobs", "outcome", "acked") == 2 &&
			sample(mfs, "ontime_handler_duration_seconds", "topic", "jobs") == 2 &&
			sample(mfs, "ontime_timers", "topic", "jobs", "state", "scheduled") == 1 &&
			sample(mfs, "ontime_timers", "topic", "jobs", "state", "leased") == 0
	}
	wait.For(t, 30*time.Second, ready, "acked 2, handler durations 2, scheduled 1, leased 0; last scrape: %s", func() string {
		return fmt.Sprintf("acked %v, handler durations %v, scheduled %v, leased %v",
			sample(mfs, "ontime_deliveries_total", "topic", "jobs", "outcome", "acked"),
			sample(mfs, "ontime_handler_duration_seconds", "topic", "jobs"),
			sample(mfs, "ontime_timers", "topic", "jobs", "state", "scheduled"),
			sample(mfs, "ontime_timers", "topic", "jobs", "state", "leased"))
	})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"ontime_published_total", []string{"topic", "jobs"}, 3},
		{"ontime_fired_total", []string{"topic", "jobs"}, 2},
		{"ontime_fired_early_total", []string{"topic", "jobs"}, 0},
		{"ontime_lateness_seconds", []string{"topic", "jobs"}, 2},
		{"ontime_handler_duration_seconds", []string{"topic", "jobs"}, 2},
		{"ontime_deliveries_in_flight", []string{"topic", "jobs"}, 0},
		{"ontime_timers", []string{"topic", "jobs", "state", "leased"}, 0},
		{"ontime_store_call_errors_total", []string{"op", "claim"}, 0},
		{"ontime_workers_unhealthy", nil, 0},
	} {
		if got := sample(mfs, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"ontime_workers", "ontime_timers_sampled_timestamp_seconds", "go_goroutines", "process_cpu_seconds_total"} {
		if got := sample(mfs, name); got <= 0 {
			t.Errorf("%s = %v, want > 0", name, got)
		}
	}
	if got := sample(mfs, "ontime_store_call_duration_seconds", "op", "schedule"); got < 3 {
		t.Errorf("schedule calls timed: %v, want at least 3", got)
	}
	checkObservabilityDoc(t, mfs)
	checkDashboard(t, mfs, filepath.Join("..", "..", "docs", "grafana-dashboard.json"))
}

// checkObservabilityDoc: every ontime metric the server serves is listed
// in docs/observability.md.
func checkObservabilityDoc(t *testing.T, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range mfs {
		if strings.HasPrefix(name, "ontime_") && !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/observability.md does not list %s", name)
		}
	}
}

// metricRef finds the metric names in a PromQL expression: the tree's
// own (ontime_), the Go collector's (go_) and the process collector's
// (process_), with the label names of their selector.
var metricRef = regexp.MustCompile(`\b((?:ontime|go|process)_[a-zA-Z0-9_]+)\b(\{[^}]*\})?`)

// selectorLabel finds the label names of a selector.
var selectorLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)

// dashboardExprs returns every PromQL expression of a Grafana dashboard:
// the panels' targets and the query variables.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			out = append(out, v.Definition)
		}
	}
	return out
}

// checkDashboard: every metric a query of the dashboard names is served
// (a histogram's _bucket, _sum and _count by its family), with the labels
// its selector names; every ontime metric served is on the dashboard.
func checkDashboard(t *testing.T, mfs map[string]*dto.MetricFamily, path string) {
	t.Helper()
	exprs := dashboardExprs(t, path)
	if len(exprs) < 10 {
		t.Fatalf("%s: only %d queries", path, len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		refs := metricRef.FindAllStringSubmatch(e, -1)
		if len(refs) == 0 {
			t.Errorf("%s: query %q names no metric", path, e)
		}
		for _, r := range refs {
			name, family := r[1], r[1]
			mf := mfs[name]
			if mf == nil {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if f, ok := strings.CutSuffix(name, suffix); ok && mfs[f] != nil && mfs[f].GetType() == dto.MetricType_HISTOGRAM {
						mf, family = mfs[f], f
					}
				}
			}
			if mf == nil {
				t.Errorf("%s: query %q uses %s, which /metrics does not serve", path, e, name)
				continue
			}
			used[family] = true
			have := map[string]bool{"le": mf.GetType() == dto.MetricType_HISTOGRAM}
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					have[lp.GetName()] = true
				}
			}
			for _, l := range selectorLabel.FindAllStringSubmatch(r[2], -1) {
				if !have[l[1]] {
					t.Errorf("%s: query %q selects label %q, which %s does not have", path, e, l[1], name)
				}
			}
		}
	}
	var missing []string
	for name := range mfs {
		if strings.HasPrefix(name, "ontime_") && !used[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("%s shows no panel of %s", path, strings.Join(missing, ", "))
	}
}
