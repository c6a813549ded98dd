package store

import (
	"errors"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
)

// newRedisDriver builds the Redis driver. (Placeholder until the
// ontimeredis driver lands.)
func newRedisDriver(rdb redis.UniversalClient, o RedisOptions, log *slog.Logger) (ontimedriver.Driver, error) {
	return nil, errors.New("the Redis driver is not available in this build")
}
