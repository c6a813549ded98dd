// Command ontime-bench runs ontime's benchmarks side by side with asynq,
// river and the raw-Redis baselines and writes BENCHMARKS.md.
//
//	go run ./bench/cmd/ontime-bench -all -out docs
//
// See package harness for the scenarios.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ontime-go/ontime/bench/harness"
)

func main() {
	if harness.ChildMain() {
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ontime-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		all       = flag.Bool("all", false, "run every scenario at full size (the default unless -quick or -scenarios)")
		quick     = flag.Bool("quick", false, "run every scenario at a small size (about a minute)")
		out       = flag.String("out", "", "directory for BENCHMARKS.md, bench/*.png and bench/results.json (e.g. docs); empty: print only")
		scenarios = flag.String("scenarios", "", "comma-separated scenarios: "+strings.Join(harness.AllScenarios, ","))
		systems   = flag.String("systems", "", "comma-separated systems: "+strings.Join(harness.SystemNames(), ","))
		runs      = flag.Int("runs", 0, "repetitions per measurement (default 3)")
		n         = flag.Int("n", 0, "throughput timers per phase for ontime and the pipeline (default 100000)")
		peerN     = flag.Int("peer-n", 0, "throughput timers per phase for asynq and river (default 5000)")
		embN      = flag.Int("embedded-n", 0, "timers per phase of the embedded scenario, every system (default 20000)")
		pubFor    = flag.Duration("publish-for", 0, "publish scenario: publishing time per measurement (default 3s)")
		w         = flag.Int("w", 0, "handler concurrency W (default 64)")
		rate      = flag.Int("rate", 0, "lateness publish rate R, timers/s (default 2000)")
		latFor    = flag.Duration("lateness-for", 0, "lateness publishing time per run (default 4s)")
		idle      = flag.Duration("idle", 0, "idle time before the idle scenario's first timer (default 30s)")
		memN      = flag.Int("memory-timers", 0, "pending timers per memory measurement (default 5000)")
		scale     = flag.String("scale-sizes", "", "pending far-future timers for the scale scenario, e.g. 10k,1M,10M (default)")
		claims    = flag.Int("scale-claims", 0, "timed claims per scale size (default 2000)")
		crashN    = flag.Int("crash-timers", 0, "timers in the crash scenario (default 5000)")
		redisBin  = flag.String("redis-server", "", "redis-server binary (default from PATH)")
		pgBin     = flag.String("pg-bin", "", "directory of initdb and postgres (default: PATH, then /usr/lib/postgresql/*/bin)")
		kafkaN    = flag.Int("kafka-n", 0, "due records per Kafka throughput run (default 200000)")
		kafkaRate = flag.Int("kafka-rate", 0, "Kafka lateness publish rate, records/s (default 2000)")
		kafkaFor  = flag.Duration("kafka-for", 0, "Kafka lateness publishing time (default 30s)")
		httpBase  = flag.String("http-baseline", "", "git ref whose ontime the http scenario also measures, as its baseline (e.g. a commit before a change)")
		httpFor   = flag.Duration("http-for", 0, "http scenario: sending time per run (default 8s)")
		httpDelay = flag.Duration("http-delay", 0, "http scenario: delay of the published timers (default 1h; under 1m, 1ms say, the server delivers them to its target during the run, and each run waits until they all are: delivered/s end to end)")
		httpStore = flag.String("http-stores", "", "http scenario: comma-separated stores, redis and/or embedded (default both)")
		ontimeBin = flag.String("ontime-bin", "", "ontime binary for the http scenario (default: go build ./cmd/ontime from this tree)")
		mtLatOnly = flag.Bool("manytopics-lateness-only", false, "manytopics scenario: measure only the lateness part (no idle `ontime serve` runs)")
		cpuProf   = flag.String("cpuprofile", "", "write a CPU profile of the whole run (harness, workers, clients) to this file")
		retarget  = flag.Bool("retarget", false, "measure nothing: evaluate the targets of -out's bench/results.json again and rewrite it and BENCHMARKS.md (charts kept)")
	)
	flag.Parse()
	if *retarget {
		if *out == "" {
			return errors.New("-retarget needs -out")
		}
		rep, err := harness.Retarget(*out)
		if err != nil {
			return err
		}
		for _, t := range rep.Targets {
			fmt.Printf("  target [%s] %s (%s): %s\n", t.Status, t.What, t.Goal, t.Measured)
		}
		return nil
	}
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg := harness.Config{}
	if *quick {
		cfg = harness.Quick()
	}
	_ = all // -all is the default; the flag makes the command self-describing.
	cfg.Out = *out
	cfg.Log = os.Stderr
	cfg.RedisServer, cfg.PGBin = *redisBin, *pgBin
	if *scenarios != "" {
		cfg.Scenarios = strings.Split(*scenarios, ",")
		for _, s := range cfg.Scenarios {
			if !contains(harness.AllScenarios, s) {
				return fmt.Errorf("unknown scenario %q", s)
			}
		}
	}
	if *systems != "" {
		cfg.Systems = strings.Split(*systems, ",")
	}
	setInt := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	setDur := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	setInt(&cfg.Runs, *runs)
	setInt(&cfg.N, *n)
	setInt(&cfg.PeerN, *peerN)
	setInt(&cfg.EmbeddedN, *embN)
	setDur(&cfg.PublishFor, *pubFor)
	setInt(&cfg.W, *w)
	setInt(&cfg.Rate, *rate)
	setDur(&cfg.LatenessFor, *latFor)
	setDur(&cfg.Idle, *idle)
	setInt(&cfg.MemoryTimers, *memN)
	setInt(&cfg.ScaleClaims, *claims)
	setInt(&cfg.CrashTimers, *crashN)
	setInt(&cfg.KafkaN, *kafkaN)
	setInt(&cfg.KafkaRate, *kafkaRate)
	setDur(&cfg.KafkaFor, *kafkaFor)
	setDur(&cfg.HTTPFor, *httpFor)
	setDur(&cfg.HTTPDelay, *httpDelay)
	if *httpStore != "" {
		cfg.HTTPStores = strings.Split(*httpStore, ",")
	}
	cfg.HTTPBaseline, cfg.OntimeBin = *httpBase, *ontimeBin
	cfg.ManyTopicsLatenessOnly = *mtLatOnly
	if *scale != "" {
		cfg.ScaleSizes = nil
		for _, f := range strings.Split(*scale, ",") {
			v, err := parseCount(f)
			if err != nil {
				return err
			}
			cfg.ScaleSizes = append(cfg.ScaleSizes, v)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := harness.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Print(harness.Summary(rep))
	return nil
}

// parseCount parses 10k, 1M, 10M, 2500.
func parseCount(s string) (int, error) {
	s = strings.TrimSpace(s)
	mul := 1
	switch {
	case strings.HasSuffix(s, "k") || strings.HasSuffix(s, "K"):
		mul, s = 1000, s[:len(s)-1]
	case strings.HasSuffix(s, "M") || strings.HasSuffix(s, "m"):
		mul, s = 1_000_000, s[:len(s)-1]
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("bad count %q", s)
	}
	return v * mul, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
