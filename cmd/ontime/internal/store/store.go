// Package store opens the timer store the configuration names: the
// embedded bbolt store in a data directory (the default) or Redis.
package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
)

// Kinds of store.
const (
	KindEmbedded = "embedded"
	KindRedis    = "redis"
)

// FileName is the embedded store's file inside the data directory.
const FileName = "ontime.db"

// Store is an open store and the Redis clients opened for it.
type Store struct {
	Driver ontimedriver.Driver
	// Kind is KindEmbedded or KindRedis.
	Kind string
	// Redis is the store's client when Kind is KindRedis.
	Redis redis.UniversalClient

	tls     RedisTLS // the store's TLS files, for the targets' URLs too
	mu      sync.Mutex
	clients map[string]redis.UniversalClient // by URL, for targets
}

// RedisOptions select the Redis store.
type RedisOptions struct {
	URL    string
	Layout string // native or compat
	Prefix string
	// TLS is the CA and client certificate of a rediss:// URL.
	TLS RedisTLS
	// Shards, WaitReplicas, WaitTimeout and ClassicPubSub are
	// ontimeredis.Options'.
	Shards        map[string]int
	WaitReplicas  int
	WaitTimeout   time.Duration
	ClassicPubSub bool
}

// OpenEmbedded opens (creating) dir/ontime.db.
func OpenEmbedded(dir string, log *slog.Logger) (*Store, error) {
	if err := makeDataDir(dir); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	d, err := ontimebolt.Open(filepath.Join(dir, FileName), &ontimebolt.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return &Store{Driver: d, Kind: KindEmbedded}, nil
}

// OpenRedis connects to Redis (the server is not contacted yet).
func OpenRedis(o RedisOptions, log *slog.Logger) (*Store, error) {
	rdb, err := newRedisClient(o.URL, o.TLS)
	if err != nil {
		return nil, err
	}
	d, err := newRedisDriver(rdb, o, log)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &Store{Driver: d, Kind: KindRedis, Redis: rdb, tls: o.TLS}, nil
}

// NewRedisClient makes a client from a URL:
//
//   - redis://[user:password@]host:port[/db], rediss:// with TLS, unix://: one
//     server;
//   - redis+cluster://[user:password@]seed1:port,seed2:port (rediss+cluster://):
//     a Redis Cluster, from any of its nodes;
//   - redis+sentinel://[user:password@]sentinel1:26379,sentinel2:26379/master[/db]
//     (rediss+sentinel://): the primary the sentinels name master, followed
//     across failovers; the user and password are the data nodes', the
//     sentinels' own are the sentinel_username and sentinel_password
//     parameters.
//
// Other query parameters are go-redis's (dial_timeout=, skip_verify=, ...).
func NewRedisClient(url string) (redis.UniversalClient, error) {
	return newRedisClient(url, RedisTLS{})
}

// RedisFor returns a Redis client for a target: the store's own for "", or
// one per URL, shared, closed by Close.
func (s *Store) RedisFor(url string) (redis.UniversalClient, error) {
	if url == "" {
		if s.Redis == nil {
			return nil, errors.New("the store is not Redis; give the target a redis URL")
		}
		return s.Redis, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[url]; ok {
		return c, nil
	}
	c, err := newRedisClient(url, s.tls)
	if err != nil {
		return nil, err
	}
	if s.clients == nil {
		s.clients = map[string]redis.UniversalClient{}
	}
	s.clients[url] = c
	return c, nil
}

// Close closes the driver, then every Redis client it opened.
func (s *Store) Close() error {
	err := s.Driver.Close()
	if s.Redis != nil {
		err = errors.Join(err, s.Redis.Close())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.clients {
		err = errors.Join(err, c.Close())
	}
	s.clients = nil
	return err
}

// makeDataDir creates dir and whatever parents it lacks, and fsyncs the
// parent of each directory it created, so that a power loss right after
// the first start cannot lose the new directory (and the store file in it;
// ontimebolt.Open fsyncs the file's own directory). Existing directories
// are left alone.
func makeDataDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var created []string // deepest first
	for p := abs; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil || filepath.Dir(p) == p {
			break
		}
		created = append(created, p)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return err
	}
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for fsync there
	}
	for _, c := range created {
		if err := syncDir(filepath.Dir(c)); err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Dir(c), err)
		}
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := f.Sync()
	if cerr := f.Close(); serr == nil {
		serr = cerr
	}
	return serr
}
