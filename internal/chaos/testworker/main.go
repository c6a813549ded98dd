// Command testworker is the worker process the chaos tests of
// internal/chaos build, start, SIGKILL and replace. It serves one topic on a
// Redis server and appends lines about each delivery to a shared log file:
//
//	D <id> <attempt> <pid>          the handler was called (written as it starts)
//	F <id> <attempt> <pid>          its work is done (written before it calls m.Ack or returns nil)
//	A <id> <attempt> <pid>          -ack=explicit: m.Ack returned nil
//	L <id> <attempt> <pid> <error>  -ack=explicit: m.Ack returned an error
//
// plus the lines of the store's answers about the worker's leases (S, R, E,
// X), written by a pass-through wrapper of the real driver: see driver.go.
// Every line starts with a kind letter, the timer id, the attempt number
// (the claim's; -1 if unknown) and the worker's pid. With -tick-ids the
// handler's lines (D, F, A, L) name a recurring timer's tick as
// <id>#<tick number>, followed by the tick's instant (Unix µs) on D lines.
//
// The file is opened with O_APPEND and every line is one write(2), so lines
// of concurrent workers never interleave and the file order is the order in
// which the writes happened. A SIGTERM (or SIGINT) stops the worker
// gracefully; SIGKILL is what the tests use to crash it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

func main() {
	var (
		addr        = flag.String("addr", "127.0.0.1:6379", "Redis host:port")
		prefix      = flag.String("prefix", "chaos:", "ontimeredis key prefix")
		topic       = flag.String("topic", "chaos", "topic to serve")
		pattern     = flag.String("pattern", "", "serve the topics matching this pattern with HandleTopics instead of -topic")
		logPath     = flag.String("log", "", "delivery log (appended to)")
		concurrency = flag.Int("concurrency", 8, "TopicOptions.MaxConcurrency")
		claimBatch  = flag.Int("claim-batch", 0, "TopicOptions.ClaimBatch (0: default)")
		lease       = flag.Duration("lease", time.Second, "TopicOptions.Lease")
		poll        = flag.Duration("poll", 200*time.Millisecond, "TopicOptions.PollInterval")
		work        = flag.Duration("work", 2*time.Millisecond, "each handler sleeps a random time in [0, work)")
		ack         = flag.String("ack", "return", "return: the handler returns nil; explicit: it calls m.Ack and waits for the store")
	)
	flag.BoolVar(&tickIDs, "tick-ids", false, "log a recurring timer's deliveries as <id>#<tick number>")
	flag.Parse()
	if err := run(*addr, *prefix, *topic, *pattern, *logPath, *concurrency, *claimBatch, *lease, *poll, *work, *ack); err != nil {
		fmt.Fprintln(os.Stderr, "testworker:", err)
		os.Exit(1)
	}
}

// tickIDs: -tick-ids.
var tickIDs bool

func run(addr, prefix, topic, pattern, logPath string, concurrency, claimBatch int, lease, poll, work time.Duration, ack string) error {
	if logPath == "" {
		return fmt.Errorf("-log is required")
	}
	if ack != "return" && ack != "explicit" {
		return fmt.Errorf("-ack must be return or explicit, not %q", ack)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	pid := strconv.Itoa(os.Getpid())
	logLine := func(kind, id string, attempt int, extra string) {
		b := make([]byte, 0, 64)
		b = append(b, kind...)
		b = append(b, ' ')
		b = append(b, id...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(attempt), 10)
		b = append(b, ' ')
		b = append(b, pid...)
		if extra != "" {
			b = append(b, ' ')
			b = append(b, extra...)
		}
		b = append(b, '\n')
		if _, err := f.Write(b); err != nil {
			// The test cannot tell a lost line from a lost timer: die loudly.
			fmt.Fprintln(os.Stderr, "testworker: write log:", err)
			os.Exit(2)
		}
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("pid", pid)
	// Built as the README shows: every bound on a store call is ontime's.
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	drv, err := ontimeredis.New(rdb, &ontimeredis.Options{Prefix: prefix, Logger: log})
	if err != nil {
		return err
	}
	defer drv.Close()
	client, err := ontime.NewClient(newObserved(drv, logLine), &ontime.Config{Logger: log})
	if err != nil {
		return err
	}
	w := ontime.NewWorker(client, &ontime.WorkerConfig{ShutdownTimeout: 5 * time.Second})
	handle := func(ctx context.Context, m *ontime.Message[[]byte]) error {
		// The delivery is logged as the handler starts, so a worker killed
		// mid-handler leaves its line: that is the delivery a crash
		// duplicates.
		id, at := m.ID, ""
		if tickIDs {
			id += "#" + strconv.FormatInt(m.Tick.N, 10)
			at = strconv.FormatInt(m.Tick.At.UnixMicro(), 10)
		}
		logLine("D", id, m.Attempt, at)
		if work > 0 {
			time.Sleep(rand.N(work))
		}
		// The work is done; nothing has asked the store to ack yet, so a
		// delivery without this line cannot have been acked.
		logLine("F", id, m.Attempt, "")
		if ack == "explicit" {
			if err := m.Ack(ctx); err != nil {
				logLine("L", id, m.Attempt, strconv.Quote(err.Error()))
				return err
			}
			logLine("A", id, m.Attempt, "")
		}
		return nil
	}
	opts := &ontime.TopicOptions{MaxConcurrency: concurrency, ClaimBatch: claimBatch, Lease: lease, PollInterval: poll}
	if pattern != "" {
		err = ontime.HandleTopics(w, pattern, handle, opts)
	} else {
		err = ontime.Handle(w, topic, handle, opts)
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// The test waits for this line before it counts the worker as started,
	// so a SIGTERM never finds the signal handler missing.
	fmt.Println("ready")
	return w.Run(ctx)
}
