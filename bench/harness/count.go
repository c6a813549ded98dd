package harness

import (
	"bufio"
	"context"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// roundTrips counts the requests a client sends to its store: one per
// command, one per pipeline or transaction, one per PostgreSQL query, batch
// or COPY. It is the client-side count of network round trips.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) load() int64 {
	if r == nil {
		return 0
	}
	return r.n.Load()
}

// redis.Hook

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// pgx tracers

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (r *roundTrips) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// cmdStats is a snapshot of Redis INFO commandstats: calls per command,
// including the commands that scripts run.
type cmdStats map[string]int64

func readCmdStats(ctx context.Context, c redis.UniversalClient) (cmdStats, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := cmdStats{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[name] = n
			}
		}
	}
	return out, sc.Err()
}

// sub returns s - prev, leaving out the harness's own INFO calls and
// commands that did not change.
func (s cmdStats) sub(prev cmdStats) cmdStats {
	out := cmdStats{}
	for k, v := range s {
		if k == "info" {
			continue
		}
		if d := v - prev[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func (s cmdStats) total() int64 {
	var t int64
	for _, v := range s {
		t += v
	}
	return t
}

// top describes the busiest commands as "zadd 2.00, hset 1.00" per unit.
func (s cmdStats) top(per float64, n int) string {
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range s {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].v != all[j].v {
			return all[i].v > all[j].v
		}
		return all[i].k < all[j].k
	})
	var b strings.Builder
	for i, e := range all {
		if i == n {
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.k)
		b.WriteByte(' ')
		b.WriteString(strconv.FormatFloat(float64(e.v)/per, 'f', 2, 64))
	}
	return b.String()
}
