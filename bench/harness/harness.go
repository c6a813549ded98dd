// Package harness runs ontime's benchmarks side by side with its peers
// (hibiken/asynq, riverqueue/river) and with the physical limits of Redis
// (redis-benchmark, a minimal hand-written pipeline), and writes the
// results as BENCHMARKS.md with PNG charts.
//
// Every run starts its own redis-server (and, for river, its own
// PostgreSQL made with initdb) on free loopback ports and stops them at the
// end. The scenarios are described on Config and in the generated
// document.
//
// A program that runs the crash scenario must call ChildMain at the start
// of main: the scenario re-executes the program as a worker subprocess that
// it kills with SIGKILL.
//
// # Adding a scenario
//
// A scenario is a name in AllScenarios, a method of bench called from Run,
// a field of Report that holds its results (carried over by carryOver when
// a run does not measure it), and its targets, tables and charts in a
// report file of its own (report_embedded.go renders the embedded, publish
// and http scenarios; evaluateTargets, Markdown and renderCharts call it).
// The systems it drives name it in sysSpec.Scenarios, so adding a
// scenario or a system does not change what the other scenarios run.
package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Scenario names, in the order Run runs them.
const (
	ScenarioRaw        = "raw"        // redis-benchmark -P 16 ZADD
	ScenarioThroughput = "throughput" // publish/s, fire+ack/s, end to end
	ScenarioLateness   = "lateness"   // steady rate, fire minus due
	ScenarioIdle       = "idle"       // first timer on an idle queue
	ScenarioMemory     = "memory"     // used_memory per pending timer
	ScenarioScale      = "scale"      // claim latency with many pending
	ScenarioCrash      = "crash"      // redeliveries after SIGKILL
	ScenarioKafka      = "kafka"      // the Kafka republisher on kfake
	ScenarioEmbedded   = "embedded"   // embedded stores: ontimebolt vs River on SQLite
	ScenarioPublish    = "publish"    // one-by-one Publish from 1, 16, 64 callers
	ScenarioHTTP       = "http"       // POST /v1/topics/{topic}/timers on ontime serve
	ScenarioManyTopics = "manytopics" // idle cost and lateness with thousands of topics
)

// AllScenarios lists every scenario.
var AllScenarios = []string{ScenarioRaw, ScenarioThroughput, ScenarioLateness, ScenarioIdle, ScenarioMemory, ScenarioScale, ScenarioCrash, ScenarioKafka,
	ScenarioEmbedded, ScenarioPublish, ScenarioHTTP, ScenarioManyTopics}

// Config sets what Run measures. Zero fields take the defaults given here,
// which are the full run; Quick returns a configuration for a fast check.
type Config struct {
	// Out is the directory the report goes to: Out/BENCHMARKS.md (the part
	// between the generated markers is replaced; text around it is kept),
	// Out/bench/*.png and Out/bench/results.json. Empty: no files.
	Out string `json:"-"`
	// Scenarios to run; default AllScenarios.
	Scenarios []string `json:"scenarios"`
	// Systems to include (names as in the report: ontime, ontime-compat,
	// asynq, asynq-tuned, river, river-tuned, pipeline); default all.
	Systems []string `json:"systems"`
	// Runs is how many times each measurement is repeated; tables show
	// medians. Default 3.
	Runs int `json:"runs"`

	// N is the number of timers per throughput phase for ontime and the
	// pipeline baseline. Default 100000.
	N int `json:"n"`
	// EmbeddedN is the number of timers per phase of the embedded
	// scenario, for every system in it (ontime's embedded store and River
	// on SQLite). Default 20000: River on SQLite moves a few hundred to a
	// thousand timers a second here, so 100000 would take an hour.
	EmbeddedN int `json:"embedded_n"`
	// PublishFor is how long each measurement of the publish scenario
	// publishes. Default 3s.
	PublishFor time.Duration `json:"publish_for"`
	// PeerN is the number of timers per throughput phase for asynq and
	// river, which are an order of magnitude slower. Default 5000.
	PeerN int `json:"peer_n"`
	// W is the handler concurrency of every system (ontime MaxConcurrency,
	// asynq Concurrency, river MaxWorkers). Default 64.
	W int `json:"w"`
	// Publishers is the number of concurrent publishing goroutines.
	// Default 16.
	Publishers int `json:"publishers"`
	// Batch is the number of timers per batched publish call. Default 100.
	Batch int `json:"batch"`
	// BodySize is the message body size in bytes for throughput and
	// lateness. Default 100.
	BodySize int `json:"body_size"`

	// Rate is the lateness scenario's publish rate R, timers/s. Default 2000.
	Rate int `json:"rate"`
	// LatenessFor is how long the lateness scenario publishes. Default 4s.
	LatenessFor time.Duration `json:"lateness_for"`
	// DelayMin and DelayMax bound each lateness timer's delay (uniform).
	// Default 50ms and 500ms.
	DelayMin time.Duration `json:"delay_min"`
	DelayMax time.Duration `json:"delay_max"`

	// Idle is how long a queue stays idle before its first timer. Default
	// 30s.
	Idle time.Duration `json:"idle"`
	// IdleDelay is the delay of the idle queue's first timer. Default 100ms.
	IdleDelay time.Duration `json:"idle_delay"`

	// MemoryTimers is the number of pending timers per memory measurement.
	// Default 20000.
	MemoryTimers int `json:"memory_timers"`

	// ScaleSizes are the pending far-future timer counts of the scale
	// scenario. Default 10k, 1M, 10M.
	ScaleSizes []int `json:"scale_sizes"`
	// ScaleCompatMax caps the compatible layout's scale sizes (default 1M;
	// negative: no cap): the target is about the native layout, and loading
	// 10M more timers for the compatible one costs about a minute.
	ScaleCompatMax int `json:"scale_compat_max"`
	// ScaleClaims is the number of timed claims per size. Default 2000.
	ScaleClaims int `json:"scale_claims"`

	// CrashTimers is the number of timers of the crash scenario. Default
	// 5000. CrashLease is the lease of the killed worker. Default 2s.
	CrashTimers int           `json:"crash_timers"`
	CrashLease  time.Duration `json:"crash_lease"`
	// CrashWait is how long the second worker gets to finish after the
	// kill. Default 10s: five leases of ontime's crashed worker; asynq's
	// fixed 30s lease cannot recover within it, which the report says.
	CrashWait time.Duration `json:"crash_wait"`

	// RawOps is redis-benchmark's -n (random members out of 1M in one
	// sorted set, so the set ends near the size of a throughput phase's).
	// Default 200000.
	RawOps int `json:"raw_ops"`

	// Latency tuning of the peers' "-tuned" variants. Defaults: asynq
	// TaskCheckInterval 5ms and DelayedTaskCheckInterval 5ms; river
	// FetchCooldown 1ms and FetchPollInterval 5ms.
	AsynqTaskCheck     time.Duration `json:"asynq_task_check"`
	AsynqDelayedCheck  time.Duration `json:"asynq_delayed_check"`
	RiverFetchCooldown time.Duration `json:"river_fetch_cooldown"`
	RiverFetchPoll     time.Duration `json:"river_fetch_poll"`

	// KafkaN is the number of due records per Kafka throughput run.
	// Default 200000.
	KafkaN int `json:"kafka_n"`
	// KafkaRate, KafkaFor, KafkaDelayMin and KafkaDelayMax shape the Kafka
	// lateness run: records/s, publishing time, and the uniform delay
	// range. Defaults 2000/s, 30s, 1s and 30s.
	KafkaRate     int           `json:"kafka_rate"`
	KafkaFor      time.Duration `json:"kafka_for"`
	KafkaDelayMin time.Duration `json:"kafka_delay_min"`
	KafkaDelayMax time.Duration `json:"kafka_delay_max"`
	// KafkaMemory is the number of records the republisher holds for the
	// memory measurement. Default 50000.
	KafkaMemory int `json:"kafka_memory"`

	// HTTPConcurrency and HTTPFor shape the HTTP scenario: connections of
	// `ontime bench-api` and how long each run sends. Defaults 32 and 8s.
	HTTPConcurrency int           `json:"http_concurrency"`
	HTTPFor         time.Duration `json:"http_for"`
	// HTTPBaseline is a git ref (a commit, a tag) whose `ontime` the HTTP
	// scenario also builds and measures in the same run, as the baseline
	// of the "HTTP publish ≥ 2× now" target. Empty: this tree only.
	HTTPBaseline string `json:"http_baseline,omitempty"`
	// HTTPDelay is the delay of the timers the HTTP scenario publishes.
	// Default 1h: the server only publishes. Under a minute (1ms, say)
	// the server also delivers every timer to its target (the default log
	// target) while the load runs, and each run waits until the topic is
	// empty: HTTPRun.DeliveredPerSecond is then publish over HTTP ->
	// delivered to the target, end to end.
	HTTPDelay time.Duration `json:"http_delay,omitempty"`
	// HTTPStores are the stores the HTTP scenario serves from: "redis",
	// "embedded". Default both.
	HTTPStores []string `json:"http_stores,omitempty"`
	// ManyTopicsCounts are the topic counts of the many-topics scenario's
	// idle measurement (one far-future timer per topic, `ontime serve`
	// idle for ManyTopicsIdleFor). Defaults 100, 10,000, 100,000 and 20s.
	ManyTopicsCounts  []int         `json:"manytopics_counts,omitempty"`
	ManyTopicsIdleFor time.Duration `json:"manytopics_idle_for"`
	// ManyTopicsLatenessTopics is how many topics the many-topics
	// lateness run spreads Rate timers/s over (next to the same load on
	// one topic). Default 10,000.
	ManyTopicsLatenessTopics int `json:"manytopics_lateness_topics"`
	// ManyTopicsLatenessOnly skips the many-topics scenario's idle
	// measurement (and the build of `ontime serve` it needs), for
	// iterating on the lateness part. Default false: both.
	ManyTopicsLatenessOnly bool `json:"manytopics_lateness_only,omitempty"`
	// OntimeBin is the ontime binary of this tree for the HTTP and
	// many-topics scenarios; default: built with go build from the tree
	// the harness runs in.
	OntimeBin string `json:"-"`

	// RedisServer is the redis-server binary; default from PATH.
	RedisServer string `json:"-"`
	// PGBin is the directory of initdb and postgres; default: PATH, then
	// /usr/lib/postgresql/*/bin.
	PGBin string `json:"-"`
	// PhaseTimeout bounds one phase of one system. Default 3m.
	PhaseTimeout time.Duration `json:"phase_timeout"`
	// Log receives progress lines; nil means none.
	Log io.Writer `json:"-"`
}

// Quick returns a configuration that runs every scenario at a small size in
// well under a minute.
func Quick() Config {
	return Config{
		Runs: 1, N: 5000, PeerN: 2000, EmbeddedN: 5000, PublishFor: time.Second, HTTPFor: 2 * time.Second, W: 32, Publishers: 8, Rate: 500,
		LatenessFor: time.Second, Idle: 2 * time.Second, MemoryTimers: 2000,
		ScaleSizes: []int{1000, 20000}, ScaleClaims: 200, CrashTimers: 500,
		CrashLease: time.Second, CrashWait: 20 * time.Second, RawOps: 100000, PhaseTimeout: time.Minute,
		KafkaN: 5000, KafkaRate: 500, KafkaFor: 3 * time.Second, KafkaDelayMin: 500 * time.Millisecond,
		KafkaDelayMax: 3 * time.Second, KafkaMemory: 5000,
		ManyTopicsCounts: []int{100, 2000}, ManyTopicsIdleFor: 2 * time.Second, ManyTopicsLatenessTopics: 500,
	}
}

func (c Config) withDefaults() Config {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	defD := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	if len(c.Scenarios) == 0 {
		c.Scenarios = AllScenarios
	}
	def(&c.Runs, 3)
	def(&c.N, 100000)
	def(&c.PeerN, 5000)
	def(&c.EmbeddedN, 20000)
	defD(&c.PublishFor, 3*time.Second)
	def(&c.HTTPConcurrency, 32)
	defD(&c.HTTPFor, 8*time.Second)
	defD(&c.HTTPDelay, time.Hour)
	if len(c.HTTPStores) == 0 {
		c.HTTPStores = []string{"redis", "embedded"}
	}
	if len(c.ManyTopicsCounts) == 0 {
		c.ManyTopicsCounts = []int{100, 10000, 100000}
	}
	defD(&c.ManyTopicsIdleFor, 20*time.Second)
	def(&c.ManyTopicsLatenessTopics, 10000)
	def(&c.W, 64)
	def(&c.Publishers, 16)
	def(&c.Batch, 100)
	def(&c.BodySize, 100)
	def(&c.Rate, 2000)
	defD(&c.LatenessFor, 4*time.Second)
	defD(&c.DelayMin, 50*time.Millisecond)
	defD(&c.DelayMax, 500*time.Millisecond)
	defD(&c.Idle, 30*time.Second)
	defD(&c.IdleDelay, 100*time.Millisecond)
	def(&c.MemoryTimers, 20000)
	if len(c.ScaleSizes) == 0 {
		c.ScaleSizes = []int{10_000, 1_000_000, 10_000_000}
	}
	if c.ScaleCompatMax == 0 {
		c.ScaleCompatMax = 1_000_000
	}
	def(&c.ScaleClaims, 2000)
	def(&c.CrashTimers, 5000)
	defD(&c.CrashLease, 2*time.Second)
	defD(&c.CrashWait, 10*time.Second)
	def(&c.RawOps, 200_000)
	def(&c.KafkaN, 200_000)
	def(&c.KafkaRate, 2000)
	defD(&c.KafkaFor, 30*time.Second)
	defD(&c.KafkaDelayMin, time.Second)
	defD(&c.KafkaDelayMax, 30*time.Second)
	def(&c.KafkaMemory, 50_000)
	defD(&c.AsynqTaskCheck, 5*time.Millisecond)
	defD(&c.AsynqDelayedCheck, 5*time.Millisecond)
	defD(&c.RiverFetchCooldown, time.Millisecond)
	defD(&c.RiverFetchPoll, 5*time.Millisecond)
	defD(&c.PhaseTimeout, 3*time.Minute)
	if c.DelayMax < c.DelayMin {
		c.DelayMax = c.DelayMin
	}
	return c
}

func (c Config) has(scenario string) bool { return slices.Contains(c.Scenarios, scenario) }

// allSpecs lists every system the harness knows, in report order.
func allSpecs(cfg Config) []sysSpec {
	var out []sysSpec
	out = append(out, ontimeSpecs(cfg)...)
	out = append(out, asynqSpecs(cfg)...)
	out = append(out, riverSpecs(cfg)...)
	out = append(out, pipelineSpec())
	out = append(out, embeddedSpecs(cfg)...)
	out = append(out, riverSQLiteSpecs(cfg)...)
	out = append(out, publishBaselineSpecs(cfg)...)
	return out
}

// originalScenarios are the scenarios a system without
// sysSpec.Scenarios takes part in.
var originalScenarios = []string{ScenarioRaw, ScenarioThroughput, ScenarioLateness, ScenarioIdle, ScenarioMemory, ScenarioScale, ScenarioCrash, ScenarioKafka}

// specsFor returns the systems of specs that take part in scenario (see
// sysSpec.Scenarios).
func specsFor(specs []sysSpec, scenario string) []sysSpec {
	var out []sysSpec
	for _, s := range specs {
		in := s.Scenarios
		if len(in) == 0 {
			in = originalScenarios
		}
		if slices.Contains(in, scenario) {
			out = append(out, s)
		}
	}
	return out
}

// SystemNames lists the systems the harness can run.
func SystemNames() []string {
	var out []string
	for _, s := range allSpecs(Config{}.withDefaults()) {
		out = append(out, s.Name)
	}
	return out
}

// Host describes the machine as measured.
type Host struct {
	NumCPU    int    `json:"nproc"`
	CPUModel  string `json:"cpu_model"`
	MemTotal  string `json:"mem_total"`
	OS        string `json:"os"`
	Go        string `json:"go"`
	Redis     string `json:"redis"`
	Postgres  string `json:"postgres,omitempty"`
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
}

// Report is everything one Run measured.
type Report struct {
	Started    time.Time          `json:"started"`
	Duration   time.Duration      `json:"duration"`
	Command    string             `json:"command"`
	Host       Host               `json:"host"`
	Config     Config             `json:"config"`
	Systems    []sysSpec          `json:"systems"`
	Raw        *RawResult         `json:"raw,omitempty"`
	Throughput []ThroughputResult `json:"throughput,omitempty"`
	Lateness   []LatenessResult   `json:"lateness,omitempty"`
	Idle       []IdleResult       `json:"idle,omitempty"`
	Memory     []MemoryResult     `json:"memory,omitempty"`
	Scale      []ScaleResult      `json:"scale,omitempty"`
	Crash      []CrashResult      `json:"crash,omitempty"`
	Kafka      *KafkaResult       `json:"kafka,omitempty"`
	// Embedded holds the embedded scenario: throughput phases of the
	// embedded stores.
	Embedded []ThroughputResult `json:"embedded,omitempty"`
	// Publish holds the one-by-one publish scenario.
	Publish []PublishResult `json:"publish,omitempty"`
	// HTTP holds the HTTP publish scenario.
	HTTP []HTTPResult `json:"http,omitempty"`
	// ManyTopics holds the many-topics scenario.
	ManyTopics *ManyTopicsResult `json:"manytopics,omitempty"`
	// Carried lists the scenarios this report did not run and took from
	// the previous results.json, with the date of that run.
	Carried []string `json:"carried,omitempty"`
	Targets []Target `json:"targets,omitempty"`
	Errors  []string `json:"errors,omitempty"`
}

// Run runs the configured scenarios and returns the report; with
// cfg.Out set it also writes BENCHMARKS.md, the charts and results.json.
// It starts and stops its own servers. A system that fails is reported in
// Report.Errors and left out of later phases; Run returns an error only when
// the harness itself cannot run.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	rep := &Report{Started: start, Config: cfg, Command: strings.Join(os.Args, " ")}
	rep.Host = measureHost()

	specs := allSpecs(cfg)
	if len(cfg.Systems) > 0 {
		var keep []sysSpec
		for _, s := range specs {
			if slices.Contains(cfg.Systems, s.Name) {
				keep = append(keep, s)
			}
		}
		for _, name := range cfg.Systems {
			if !slices.ContainsFunc(specs, func(s sysSpec) bool { return s.Name == name }) {
				return nil, fmt.Errorf("unknown system %q (known: %s)", name, strings.Join(SystemNames(), ", "))
			}
		}
		specs = keep
	}
	rep.Systems = specs

	rs, err := StartRedis(ctx, cfg.RedisServer)
	if err != nil {
		return nil, err
	}
	defer rs.Stop()
	rep.Host.Redis = rs.Version
	logf("redis-server %s on %s", rs.Version, rs.Addr)
	e := &env{cfg: cfg, redis: rs, logf: logf}
	e.admin = e.newRedis(nil, 8)
	defer e.admin.Close()
	defer func() {
		e.pgMu.Lock()
		defer e.pgMu.Unlock()
		if e.pg != nil {
			e.pg.Stop()
			logf("PostgreSQL stopped")
		}
	}()

	b := &bench{env: e, rep: rep, failed: map[string]bool{}}
	if cfg.has(ScenarioRaw) {
		b.raw(ctx)
	}
	if cfg.has(ScenarioThroughput) {
		b.throughput(ctx, specsFor(specs, ScenarioThroughput))
	}
	if cfg.has(ScenarioLateness) {
		b.lateness(ctx, specsFor(specs, ScenarioLateness))
	}
	if cfg.has(ScenarioIdle) {
		b.idle(ctx, specsFor(specs, ScenarioIdle))
	}
	if cfg.has(ScenarioMemory) {
		b.memory(ctx, specsFor(specs, ScenarioMemory))
	}
	if cfg.has(ScenarioScale) {
		b.scale(ctx, specsFor(specs, ScenarioScale))
	}
	if cfg.has(ScenarioCrash) {
		b.crash(ctx, specsFor(specs, ScenarioCrash))
	}
	if cfg.has(ScenarioKafka) {
		b.kafka(ctx)
	}
	if cfg.has(ScenarioEmbedded) {
		b.embedded(ctx, specsFor(specs, ScenarioEmbedded))
	}
	if cfg.has(ScenarioPublish) {
		b.publishScenario(ctx, specsFor(specs, ScenarioPublish))
	}
	if cfg.has(ScenarioHTTP) {
		b.http(ctx)
	}
	if cfg.has(ScenarioManyTopics) {
		b.manyTopics(ctx)
	}
	if e.pg != nil {
		rep.Host.Postgres = e.pg.Version
	}
	rep.Host.LoadEnd = loadAvg()
	if cfg.Out != "" {
		carryOver(rep, cfg.Out)
	}
	rep.Targets = evaluateTargets(rep)
	rep.Duration = time.Since(start)
	logf("done in %s", rep.Duration.Round(time.Second))
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	if cfg.Out != "" {
		if err := writeOutputs(rep, cfg.Out); err != nil {
			return rep, err
		}
		logf("wrote %s", filepath.Join(cfg.Out, "BENCHMARKS.md"))
	}
	return rep, nil
}

// bench carries one Run's state through the scenarios.
type bench struct {
	*env
	rep    *Report
	failed map[string]bool // systems that failed to open
}

func (b *bench) errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	b.logf("ERROR %s", msg)
	b.rep.Errors = append(b.rep.Errors, msg)
}

// open opens a system, recording a failure once.
func (b *bench) open(s sysSpec) system {
	if b.failed[s.Name] {
		return nil
	}
	sys, err := s.open(b.env)
	if err != nil {
		b.failed[s.Name] = true
		b.errorf("%s: open: %v", s.Name, err)
		return nil
	}
	return sys
}

// reset empties a system's store between phases when it can.
func reset(ctx context.Context, s system) error {
	if r, ok := s.(interface{ reset(context.Context) error }); ok {
		return r.reset(ctx)
	}
	return nil
}

func measureHost() Host {
	h := Host{NumCPU: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version(), LoadStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				h.MemTotal = strings.TrimSpace(v)
			}
		}
	}
	return h
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// writeJSON writes v indented to path.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
