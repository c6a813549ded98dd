package harness

// Profiling hook of BenchmarkE2E: with ONTIME_BENCH_PROFILE=1 it reports,
// besides what the benchmark measures, the Redis server's CPU per timer
// (INFO cpu growth over the timed phase divided by N), the benchmark
// process's CPU per timer (getrusage: publishers, workers and the
// harness together) and logs INFO commandstats' calls and usec per call
// for the commands the phase ran. The snapshots are taken outside the
// timed section; they do not change what the benchmark measures.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func profileHookOn() bool { return os.Getenv("ONTIME_BENCH_PROFILE") != "" }

// cmdUsec is INFO commandstats' calls and total usec per command.
type cmdUsec map[string][2]float64

func readCmdUsec(ctx context.Context, e *env) cmdUsec {
	info, err := e.admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil
	}
	out := cmdUsec{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var v [2]float64
		for _, kv := range strings.Split(rest, ",") {
			if s, ok := strings.CutPrefix(kv, "calls="); ok {
				v[0], _ = strconv.ParseFloat(s, 64)
			}
			if s, ok := strings.CutPrefix(kv, "usec="); ok {
				v[1], _ = strconv.ParseFloat(s, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return out
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

type profSnap struct {
	redisCPU, goCPU float64
	cmds            cmdUsec
}

func takeProfSnap(ctx context.Context, e *env) profSnap {
	return profSnap{redisCPU: redisCPU(ctx, e.admin), goCPU: selfCPU(), cmds: readCmdUsec(ctx, e)}
}

// report adds the hook's metrics for n timers since s.
func (s profSnap) report(ctx context.Context, b *testing.B, e *env, n int) {
	now := takeProfSnap(ctx, e)
	b.ReportMetric((now.redisCPU-s.redisCPU)*1e6/float64(n), "redis_us/timer")
	b.ReportMetric((now.goCPU-s.goCPU)*1e6/float64(n), "go_us/timer")
	var names []string
	for k := range now.cmds {
		if k != "info" && now.cmds[k][0] > s.cmds[k][0] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, k := range names {
		calls := now.cmds[k][0] - s.cmds[k][0]
		usec := now.cmds[k][1] - s.cmds[k][1]
		fmt.Fprintf(&sb, " %s: %.3f calls/timer %.1f usec/call %.2f usec/timer;", k, calls/float64(n), usec/calls, usec/float64(n))
	}
	b.Logf("commandstats:%s", sb.String())
}
