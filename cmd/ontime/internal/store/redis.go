package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// newRedisDriver builds the Redis driver on rdb (which the caller owns).
// Layout "native" (default) uses o.Prefix as the key prefix ("" means the
// driver's default, "ontime:") and keeps the topic index on a Cluster too;
// "compat" is the faststream-redis-timers layout, whose key names are
// fixed.
func newRedisDriver(rdb redis.UniversalClient, o RedisOptions, log *slog.Logger) (ontimedriver.Driver, error) {
	opts := &ontimeredis.Options{Logger: log, Shards: o.Shards, WaitReplicas: o.WaitReplicas, WaitTimeout: o.WaitTimeout, ClassicPubSub: o.ClassicPubSub}
	switch o.Layout {
	case "", "native":
		opts.Layout = ontimeredis.Native
		opts.Prefix = o.Prefix
		// The server serves every topic from the topic index (one
		// HandleTopics loop), which the driver keeps on a Cluster too
		// (by default: docs/server.md).
	case "compat":
		if o.Prefix != "" {
			return nil, fmt.Errorf("redis prefix %q: the compat layout has fixed key names (timers_timeline:<topic>, timers_payloads:<topic>)", o.Prefix)
		}
		opts.Layout = ontimeredis.Compatible
	default:
		return nil, fmt.Errorf("redis layout %q: want native or compat", o.Layout)
	}
	return ontimeredis.New(rdb, opts)
}

// RouteRedisLogs sends go-redis's own log lines (a dropped pub/sub
// connection, a pool that cannot dial, ...) to log at level warn, instead of
// go-redis's default logger, which writes plain text to standard error past
// the configured log format. go-redis has one logger per process, so the
// last call wins.
func RouteRedisLogs(log *slog.Logger) {
	redis.SetLogger(redisLogger{log})
}

// redisLogger adapts a slog.Logger to go-redis's Logging interface.
type redisLogger struct{ log *slog.Logger }

// Printf implements go-redis's Logging.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.Log(ctx, slog.LevelWarn, msg, "component", "go-redis")
}
