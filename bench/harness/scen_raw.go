package harness

import "context"

// RawResult is redis-benchmark's pipelined ZADD rate on the harness's Redis.
type RawResult struct {
	Command string `json:"command"`
	Runs    []F    `json:"runs"`
	Median  F      `json:"median"`
	Err     string `json:"error,omitempty"`
}

func (b *bench) raw(ctx context.Context) {
	cfg := b.cfg
	b.logf("== raw: redis-benchmark -P 16 -t zadd -n %d, %d runs", cfg.RawOps, cfg.Runs)
	res := &RawResult{}
	for range cfg.Runs {
		// Every run starts from an empty Redis, as every system's phase
		// starts on a fresh queue: ZADD into a sorted set that already
		// holds millions of members costs more.
		_ = b.admin.FlushAll(ctx).Err()
		v, cmd, err := redisBenchmarkZADD(ctx, b.redis.Addr, cfg.RawOps)
		res.Command = cmd
		if err != nil {
			res.Err = err.Error()
			b.errorf("raw: %v", err)
			break
		}
		res.Runs = append(res.Runs, F(v))
	}
	res.Median = F(median(fs(res.Runs)))
	b.logf("raw ZADD -P 16: %s/s", fmtRate(res.Median))
	_ = b.admin.FlushAll(ctx).Err()
	b.rep.Raw = res
}
