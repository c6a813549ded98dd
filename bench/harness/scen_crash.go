package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// CrashResult is what killing a worker mid-batch cost one system.
type CrashResult struct {
	System string `json:"system"`
	Timers int    `json:"timers"`
	// HandledBeforeKill is how many timers the killed worker's handler had
	// finished when it was killed.
	HandledBeforeKill int64 `json:"handled_before_kill"`
	// Redelivered counts timers the killed worker had handled that the
	// second worker handled again (their acks were lost with the process),
	// plus repeated deliveries to the second worker.
	Redelivered int64 `json:"redelivered"`
	// Lost counts timers nobody handled within Config.CrashWait of the
	// kill.
	Lost int `json:"lost"`
	// Recovery is the time from the kill until every timer was handled.
	Recovery F      `json:"recovery_s"`
	Lease    string `json:"lease"`
	Err      string `json:"error,omitempty"`
}

const childEnv = "ONTIME_BENCH_CHILD"

// childArgs tells a crash child what to run.
type childArgs struct {
	Redis  string        `json:"redis"`
	System string        `json:"system"`
	Queue  string        `json:"queue"`
	W      int           `json:"w"`
	Lease  time.Duration `json:"lease"`
	Seen   string        `json:"seen"`
}

// ChildMain runs the crash scenario's worker subprocess when this process
// is one (it then never returns: it works until it is killed) and returns
// false otherwise. Programs that run the crash scenario call it first thing
// in main.
func ChildMain() bool {
	v := os.Getenv(childEnv)
	if v == "" {
		return false
	}
	var a childArgs
	if err := json.Unmarshal([]byte(v), &a); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	e := &env{cfg: Config{}.withDefaults(), redis: &RedisServer{Addr: a.Redis}, logf: func(string, ...any) {}}
	e.cfg.CrashLease = a.Lease
	var spec *sysSpec
	for _, s := range allSpecs(e.cfg) {
		if s.Name == a.System {
			spec = &s
		}
	}
	if spec == nil {
		fmt.Fprintln(os.Stderr, "crash child: unknown system", a.System)
		os.Exit(2)
	}
	sys, err := spec.open(e)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	if l, ok := sys.(interface{ setLease(time.Duration) }); ok {
		l.setLease(a.Lease)
	}
	seen := e.newRedis(nil, a.W)
	_, err = sys.work(context.Background(), a.Queue, a.W, func(body []byte) {
		_, seq, _, _ := parseBody(body)
		time.Sleep(2 * time.Millisecond) // a handler with some work in it
		_ = seen.SAdd(context.Background(), a.Seen, seq).Err()
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	select {}
}

// crash publishes cfg.CrashTimers timers due now, lets a worker subprocess
// handle about half of them, kills it with SIGKILL, starts a worker in this
// process and counts what was handled twice or never.
func (b *bench) crash(ctx context.Context, specs []sysSpec) {
	cfg := b.cfg
	exe, err := os.Executable()
	if err != nil {
		b.errorf("crash: %v", err)
		return
	}
	b.logf("== crash: %d timers due now, worker subprocess SIGKILLed after about half, lease %s", cfg.CrashTimers, cfg.CrashLease)
	for _, spec := range specs {
		if spec.Store != "redis" || spec.Tuned || spec.Family == "baseline" {
			continue
		}
		sys := b.open(spec)
		if sys == nil {
			continue
		}
		res := b.crashRun(ctx, exe, spec, sys)
		sys.close()
		if res.Err != "" {
			b.errorf("crash %s: %s", spec.Name, res.Err)
		} else {
			b.logf("crash %-14s: handled %d before the kill, %d redelivered, %d lost, all done %.1fs after the kill (lease %s)",
				spec.Name, res.HandledBeforeKill, res.Redelivered, res.Lost, res.Recovery, res.Lease)
		}
		b.rep.Crash = append(b.rep.Crash, res)
	}
}

func (b *bench) crashRun(ctx context.Context, exe string, spec sysSpec, sys system) CrashResult {
	cfg := b.cfg
	n := cfg.CrashTimers
	res := CrashResult{System: spec.Name, Timers: n, Recovery: nan, Lease: cfg.CrashLease.String()}
	if spec.Family == "asynq" {
		res.Lease = "30s (asynq's fixed lease)"
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	q := queueName(spec.Name, "crash")
	seenKey := "benchcrash:" + q
	t := newTracker(n)
	ts := make([]timer, n)
	for i := range ts {
		ts[i] = timer{body: t.body(time.Time{}, i, cfg.BodySize)}
	}
	batch := 1
	if spec.Batch {
		batch = cfg.Batch
	}
	if _, err := publishAll(pctx, sys, q, ts, batch, cfg.Publishers); err != nil {
		res.Err = err.Error()
		return res
	}
	args, _ := json.Marshal(childArgs{Redis: b.redis.Addr, System: spec.Name, Queue: q, W: cfg.W, Lease: cfg.CrashLease, Seen: seenKey})
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(args))
	proc, err := startChild(cmd)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	for {
		c, err := b.admin.SCard(pctx, seenKey).Result()
		if err == nil && c >= int64(n/2) {
			break
		}
		if !proc.alive() || pctx.Err() != nil {
			proc.stop(syscall.SIGKILL, time.Second)
			res.Err = fmt.Sprintf("the child did not handle half the timers: %v\n%s", pctx.Err(), proc.out.String())
			return res
		}
		time.Sleep(time.Millisecond)
	}
	proc.stop(syscall.SIGKILL, time.Second)
	killed := time.Now()
	members, err := b.admin.SMembers(pctx, seenKey).Result()
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.HandledBeforeKill = int64(len(members))
	// Count the child's handled timers as seen; the tracker then finishes
	// when the rest are handled here.
	child := make([]bool, n)
	for _, m := range members {
		if v, err := strconv.Atoi(m); err == nil && v >= 0 && v < n {
			child[v] = true
		}
	}
	ours := newTracker(n)
	ours.tag = t.tag
	for i, c := range child {
		if c {
			ours.handle(t.body(time.Time{}, i, bodyHeader))
		}
	}
	ours.total.Store(0)
	stop, err := sys.work(pctx, q, cfg.W, ours.handle)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	wctx, wcancel := context.WithTimeout(pctx, cfg.CrashWait)
	defer wcancel()
	select {
	case <-ours.done:
		res.Recovery = F(time.Since(killed).Seconds())
	case <-wctx.Done():
	}
	stop(pctx)
	res.Lost = n - int(ours.unique.Load())
	// Every delivery beyond the first of its timer (the child's counted as
	// first) is a redelivery.
	res.Redelivered = res.HandledBeforeKill + ours.total.Load() - ours.unique.Load()
	_ = b.admin.Del(ctx, seenKey).Err()
	return res
}
