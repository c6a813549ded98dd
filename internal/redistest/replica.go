package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartReplica starts a redis-server that replicates master (replicaof)
// and waits until master counts it as an online replica (so that WAIT on
// master counts it). It is stopped when tb ends.
func StartReplica(tb testing.TB, master *Server, opts ...ServerOption) *Server {
	tb.Helper()
	host, port, _ := strings.Cut(master.Addr, ":")
	opts = append(opts, Args("--replicaof", host, port, "--repl-diskless-sync-delay", "0"))
	r := StartServer(tb, opts...)
	mc := master.NewClient(tb)
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := mc.Info(ctx, "replication").Result()
		if err == nil && onlineReplicas(info) >= 1 {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: replica %s of %s not online after 30 s: %v\n%s", r.Addr, master.Addr, err, info)
		}
		// an online replica is announced by the master's INFO; a write
		// makes the first sync's offset non-zero sooner
		_ = mc.Do(ctx, "PING").Err()
		time.Sleep(20 * time.Millisecond)
	}
}

// onlineReplicas counts the "slaveN:...,state=online,..." lines of INFO
// replication.
func onlineReplicas(info string) int {
	n := 0
	for line := range strings.SplitSeq(info, "\n") {
		if strings.HasPrefix(line, "slave") && strings.Contains(line, "state=online") {
			if _, err := strconv.Atoi(strings.TrimPrefix(strings.Split(line, ":")[0], "slave")); err == nil {
				n++
			}
		}
	}
	return n
}
