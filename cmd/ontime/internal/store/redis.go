package store

import (
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

// newRedisDriver builds the Redis driver on rdb (which the caller owns).
// Layout "native" (default) uses o.Prefix as the key prefix ("" means the
// driver's default, "ontime:"); "compat" is the faststream-redis-timers
// layout, whose key names are fixed.
func newRedisDriver(rdb redis.UniversalClient, o RedisOptions, log *slog.Logger) (ontimedriver.Driver, error) {
	opts := &ontimeredis.Options{Logger: log}
	switch o.Layout {
	case "", "native":
		opts.Layout = ontimeredis.Native
		opts.Prefix = o.Prefix
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
