// Package config holds the ontime server's configuration: defaults, the
// optional TOML file, ONTIME_* environment variables and command-line flags,
// applied in that order (a later source wins). docs/server.md documents
// every key.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/kafkadelay"
	"github.com/ontime-go/ontime/ontimedriver"
)

// Defaults of the server configuration.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultDataDir         = "./ontime-data"
	DefaultMaxBodyBytes    = 1 << 20
	DefaultDiscover        = time.Second
	DefaultShutdownTimeout = 15 * time.Second
	DefaultHTTPTimeout     = 10 * time.Second
	DefaultReadTimeout     = 30 * time.Second
	DefaultServer          = "http://127.0.0.1:8080"
	DefaultMetricsSample   = 15 * time.Second
	DefaultMetricsTopics   = 100
)

// Config is the server configuration. Zero fields take the defaults named
// on each field (see Fill).
type Config struct {
	// Listen is the HTTP address. Default 127.0.0.1:8080.
	Listen string `toml:"listen"`
	// DataDir holds the embedded store's file (ontime.db). Default
	// ./ontime-data. Unused when Redis is set.
	DataDir string `toml:"data_dir"`
	// Redis, a redis:// or rediss:// URL (redis+cluster://seed1,seed2 for
	// a Cluster, redis+sentinel://sentinel1,sentinel2/master for Sentinel),
	// switches the store to Redis. Default "" (embedded store).
	Redis string `toml:"redis"`
	// RedisTLSCA, RedisTLSCert and RedisTLSKey are PEM files for a
	// rediss URL: the CA to trust instead of the system's, and a client
	// certificate and its key for a server that asks for one.
	RedisTLSCA   string `toml:"redis_tls_ca"`
	RedisTLSCert string `toml:"redis_tls_cert"`
	RedisTLSKey  string `toml:"redis_tls_key"`
	// RedisLayout is "native" (default) or "compat" (the
	// faststream-redis-timers layout).
	RedisLayout string `toml:"redis_layout"`
	// RedisPrefix starts every key of the native layout. Default "" (the
	// driver's "ontime:"). The compat layout has fixed key names and
	// refuses a prefix.
	RedisPrefix string `toml:"redis_prefix"`
	// RedisShards spreads hot topics over several shards, so that one
	// topic can use several masters of a Redis Cluster: topic name or
	// pattern → shard count, 1 to 1024 (ontimeredis Options.Shards; see
	// the ontimeredis package documentation). Native layout only. Every
	// server and worker that uses a topic must give it the same count.
	// Env/flag form: "clicks=3,orders.*=2". Default none.
	RedisShards map[string]int `toml:"redis_shards"`
	// RedisClassicPubSub makes a Redis Cluster carry wake-ups with classic
	// pub/sub (PUBLISH, SUBSCRIBE) instead of sharded pub/sub (SPUBLISH,
	// SSUBSCRIBE, the default, which needs Redis 7.0): set it for a Cluster
	// of older Redis (ontimeredis Options.ClassicPubSub). Every server and
	// worker on the Cluster must agree. No effect on one Redis. Default
	// false.
	RedisClassicPubSub bool `toml:"redis_classic_pubsub"`
	// WaitReplicas makes every publish wait until this many Redis replicas
	// have acknowledged it (WAIT), at most WaitTimeout (default 1s), and
	// fail (503) when fewer did: a failover then cannot lose an
	// acknowledged publish (docs/guarantees.md). Default 0 (a publish is
	// acknowledged when the primary has it). Redis only.
	WaitReplicas int `toml:"wait_replicas"`
	// WaitTimeout bounds the wait for replicas. Default 1s.
	WaitTimeout Duration `toml:"wait_timeout"`
	// MaxBodyBytes caps a message body. Default 1 MiB.
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// ReadTimeout bounds reading a request's body once its headers have
	// arrived (headers have 10s); a slower client gets 408 and its
	// connection is closed. Requests without a body, such as watch streams,
	// are not bounded. Default 30s.
	ReadTimeout Duration `toml:"read_timeout"`
	// MaxInflightBytes caps the request bodies the API reads and handles at
	// once, counted by their declared size (a chunked one as its endpoint's
	// largest request); one that does not fit answers 503 with Retry-After
	// before its body is read. Default 0: four of the largest requests (64
	// MiB with the default MaxBodyBytes). It must be at least the largest
	// request.
	MaxInflightBytes int64 `toml:"max_inflight_bytes"`
	// MinBodyRate is the slowest a request body may arrive, in bytes per
	// second, measured over 2-second windows: a slower one is cut with 408
	// and gives back the bytes it held. Default 0: 16384 (16 KiB/s);
	// negative: no minimum (read_timeout alone).
	MinBodyRate int64 `toml:"min_body_rate"`
	// Tokens turns on bearer-token auth: every endpoint but /healthz and
	// /readyz then needs "Authorization: Bearer <token>". These tokens have
	// the admin role (everything), as every token had before roles; prefer
	// AdminTokens. Default none (auth off).
	Tokens []string `toml:"tokens"`
	// ReadTokens may read: every GET (timers, topics, dead letters,
	// stats), /metrics and watch streams. A Prometheus scraper's token.
	ReadTokens []string `toml:"read_tokens"`
	// WriteTokens may also publish, cancel and fire timers.
	WriteTokens []string `toml:"write_tokens"`
	// AdminTokens may also replay and purge dead letters: everything.
	AdminTokens []string `toml:"admin_tokens"`
	// AllowedHosts are the host names clients reach the server by, for
	// the Host check: a request whose Host header names neither the
	// address it connected to, nor (on a loopback connection) localhost,
	// nor one of these, answers 421 (what a DNS-rebinding page sends).
	// "*.example.com" allows every subdomain; "*" turns the check off.
	// Default none: the address and the loopback names only.
	AllowedHosts []string `toml:"allowed_hosts"`
	// ServeTopics names the topics, besides the configured ones ([topics.NAME]),
	// whose timers this server delivers: names or patterns where * matches
	// any run of characters and ? any one ("billing.*", "tenant-?", "*"),
	// as the library's HandleTopics patterns (ontimedriver.MatchTopic). The server starts a worker
	// for a matching topic when the API schedules a timer on it, and finds
	// matching topics written by other processes every DiscoverInterval.
	// A topic that matches nothing and is not configured is never delivered
	// by this server (its timers stay for their own consumers) and cannot
	// be watched. Default: ["*"] (every topic) with the native layout; []
	// (only the configured topics) with the compat layout, whose keyspace
	// belongs to faststream-redis-timers consumers.
	ServeTopics []string `toml:"serve_topics"`
	// DiscoverInterval is how often the server looks for topics matching
	// ServeTopics that it does not serve yet. Default 1s.
	DiscoverInterval Duration `toml:"discover_interval"`
	// ShutdownTimeout bounds a graceful stop. Default 15s.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// MetricsSampleInterval is how often the server counts the timers of
	// every topic it delivers for the ontime_timers gauges of /metrics
	// (one count per topic; never per scrape). Default 15s.
	MetricsSampleInterval Duration `toml:"metrics_sample_interval"`
	// MetricsMaxTopics caps the topic label values of /metrics: topics
	// seen after that many are counted under topic="(other)"
	// (docs/observability.md). Default 100; negative: no cap.
	MetricsMaxTopics int `toml:"metrics_max_topics"`
	// LogLevel is debug, info (default), warn or error.
	LogLevel string `toml:"log_level"`
	// LogFormat is text (default) or json.
	LogFormat string `toml:"log_format"`
	// Defaults apply to every topic for the fields its own section leaves
	// unset; the default target is log.
	Defaults Topic `toml:"defaults"`
	// Topics configures topics by name.
	Topics map[string]Topic `toml:"topics"`
	// Schedules declares recurring timers, created or updated at start
	// ([[schedules]] tables; see Schedule).
	Schedules []Schedule `toml:"schedules"`
}

// Topic configures the delivery of one topic.
type Topic struct {
	// Concurrency is how many of the topic's timers are delivered at once.
	// Default 10.
	Concurrency int `toml:"concurrency"`
	// Lease is how long a delivery may run before the timer is handed out
	// again (it is extended while the delivery runs). Default 30s.
	Lease Duration `toml:"lease"`
	// Retry is the retry policy for failed deliveries.
	Retry Retry `toml:"retry"`
	// Target is where fired timers go. Default: the log target.
	Target *Target `toml:"target"`
	// WatchWindow is how many events a confirming watcher of the topic
	// may hold unconfirmed (docs/server.md, "Watching"). Default 16.
	WatchWindow int `toml:"watch_window"`
}

// Retry is a retry policy; zero fields take the library defaults (1s, 10m,
// 2, 0.2, 25 attempts).
type Retry struct {
	MinDelay    Duration `toml:"min_delay"`
	MaxDelay    Duration `toml:"max_delay"`
	Multiplier  float64  `toml:"multiplier"`
	Jitter      float64  `toml:"jitter"`
	MaxAttempts Attempts `toml:"max_attempts"`
}

// Attempts is retry.max_attempts: >= 1, or -1 to retry forever; left out
// (0 in the struct) it is the library default. Written out as 0 it is
// refused while the file is decoded (the error names the key): "no
// delivery at all" is never what anyone means.
type Attempts int

// UnmarshalTOML refuses a written 0 and anything but an integer.
func (a *Attempts) UnmarshalTOML(v any) error {
	n, ok := v.(int64)
	switch {
	case !ok:
		return fmt.Errorf("want an integer, got %v", v)
	case n == 0:
		return errors.New("0: a timer needs at least 1 delivery; leave the key out for the default (25), or write -1 to retry forever")
	}
	*a = Attempts(n)
	return nil
}

// Target types.
const (
	TargetLog         = "log"
	TargetHTTP        = "http"
	TargetRedisStream = "redis-stream"
	TargetKafka       = "kafka"
)

// What a kafka target uses as the record key (Target.Key).
const (
	KafkaKeyID            = "id"             // the timer id (the default)
	KafkaKeyCorrelationID = "correlation_id" // the timer's correlation id
	KafkaKeyNone          = "none"           // no key
	KafkaKeyHeaderPrefix  = "header:"        // "header:NAME": that timer header's value
)

// Target is a delivery target. Type selects which fields apply.
type Target struct {
	// Type is log, http, redis-stream or kafka.
	Type string `toml:"type"`

	// URL is the webhook URL (http).
	URL string `toml:"url"`
	// Secret signs each request by the Standard Webhooks specification
	// (http): one or more "whsec_" secrets (base64 of 24 to 64 random
	// bytes) separated by spaces or commas; each signs every request, so
	// that a receiver can move from one to the next (rotation). SecretEnv
	// names an environment variable to read them from instead.
	Secret    string `toml:"secret"`
	SecretEnv string `toml:"secret_env"`
	// Payload is what the request body holds (http): "envelope" (the
	// default: a signed JSON envelope with the timer's topic, id, attempt
	// and body) or "raw" (the body as published).
	Payload string `toml:"payload"`
	// ForwardHeaders lists the timer headers sent as HTTP headers (http);
	// default none. Credentials, proxy and framing headers are refused
	// (ForwardRefusal).
	ForwardHeaders []string `toml:"forward_headers"`
	// LegacySignature also sends the earlier Ontime-Signature header
	// ("sha256=" and the hex HMAC-SHA256 of the body keyed with the first
	// secret's bytes), for receivers not moved to webhook-signature yet
	// (http). Default false; removed in the next release.
	LegacySignature bool `toml:"legacy_signature"`
	// Timeout bounds one request (http). Default 10s.
	Timeout Duration `toml:"timeout"`
	// Headers are added to every request (http).
	Headers map[string]string `toml:"headers"`

	// Stream is the stream key (redis-stream). Default: the topic name.
	Stream string `toml:"stream"`
	// MaxLen trims the stream approximately to this length (redis-stream).
	// Default 0: no trimming.
	MaxLen int64 `toml:"maxlen"`
	// Redis is the Redis URL to write to (redis-stream). Default: the
	// store's Redis; required with the embedded store.
	Redis string `toml:"redis"`

	// Brokers are the Kafka bootstrap servers, host:port (kafka).
	// Required.
	Brokers []string `toml:"brokers"`
	// KafkaTopic is the Kafka topic (kafka). Default: the topic name.
	KafkaTopic string `toml:"kafka_topic"`
	// Key is what becomes the record key (kafka): "id" (the default),
	// "correlation_id", "none", or "header:NAME" for a timer header.
	Key string `toml:"key"`
}

// Duration is a time.Duration that reads from TOML as "90s".
type Duration time.Duration

// UnmarshalText parses Go duration syntax.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes Go duration syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// LoadFile reads a TOML file into c (keys it sets override c's). Unknown keys
// are an error, so a typo does not go unnoticed, and so is a token list
// the file gives with no token or with a blank one (see checkTokenList).
func (c *Config) LoadFile(path string) error {
	md, err := toml.DecodeFile(path, c)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	for _, k := range c.tokenKeys() {
		if md.IsDefined(k.key) {
			if err := checkTokenList(*k.list); err != nil {
				return fmt.Errorf("config %s: %s: %w", path, k.key, err)
			}
		}
	}
	return nil
}

// tokenKey is one of the token lists, by its key.
type tokenKey struct {
	key  string
	list *[]string
}

func (c *Config) tokenKeys() []tokenKey {
	return []tokenKey{{"tokens", &c.Tokens}, {"read_tokens", &c.ReadTokens}, {"write_tokens", &c.WriteTokens}, {"admin_tokens", &c.AdminTokens}}
}

// checkTokenList refuses a token list that a source gave with no token in
// it, or with a blank one (empty, or only spaces): auth fails closed. A
// variable set to "" (a template whose value was missing) or to ","
// would otherwise leave the server open to everyone. To run without auth,
// leave the key out.
func checkTokenList(list []string) error {
	if len(list) == 0 {
		return errors.New("holds no token; leave the key out (or unset it) to run without auth")
	}
	for i, t := range list {
		if strings.TrimSpace(t) == "" {
			return fmt.Errorf("token %d of %d is blank; remove it (a blank token would turn auth off)", i+1, len(list))
		}
	}
	return nil
}

// splitTokens reads a comma-separated token list of the environment or a
// flag, refusing blank entries (checkTokenList).
func splitTokens(v string) ([]string, error) {
	var out []string
	if strings.TrimSpace(v) != "" {
		out = strings.Split(v, ",")
	}
	if err := checkTokenList(out); err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = strings.TrimSpace(out[i])
	}
	return out, nil
}

// Env variable names, each mapping to the key of the same name.
var envKeys = []string{
	"ONTIME_LISTEN", "ONTIME_DATA_DIR", "ONTIME_REDIS", "ONTIME_REDIS_LAYOUT",
	"ONTIME_REDIS_PREFIX", "ONTIME_MAX_BODY_BYTES", "ONTIME_TOKENS",
	"ONTIME_DISCOVER_INTERVAL", "ONTIME_SHUTDOWN_TIMEOUT", "ONTIME_LOG_LEVEL",
	"ONTIME_LOG_FORMAT", "ONTIME_SERVE_TOPICS", "ONTIME_READ_TIMEOUT",
	"ONTIME_MAX_INFLIGHT_BYTES", "ONTIME_METRICS_SAMPLE_INTERVAL", "ONTIME_METRICS_MAX_TOPICS",
	"ONTIME_READ_TOKENS", "ONTIME_WRITE_TOKENS", "ONTIME_ADMIN_TOKENS", "ONTIME_ALLOWED_HOSTS",
	"ONTIME_MIN_BODY_RATE", "ONTIME_REDIS_TLS_CA", "ONTIME_REDIS_TLS_CERT", "ONTIME_REDIS_TLS_KEY",
	"ONTIME_MIN_BODY_RATE", "ONTIME_REDIS_SHARDS", "ONTIME_WAIT_REPLICAS", "ONTIME_WAIT_TIMEOUT",
	"ONTIME_REDIS_CLASSIC_PUBSUB",
}

// EnvKeys lists the environment variables ApplyEnv reads.
func EnvKeys() []string { return append([]string(nil), envKeys...) }

// ApplyEnv applies the ONTIME_* variables that are set (lookup is usually
// os.LookupEnv).
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) error {
	var errs []error
	for _, k := range envKeys {
		v, ok := lookup(k)
		if !ok {
			continue
		}
		if err := c.Set(strings.ToLower(strings.TrimPrefix(k, "ONTIME_")), v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// Set sets one top-level key from its text form (used by env and flags).
func (c *Config) Set(key, v string) error {
	switch key {
	case "listen":
		c.Listen = v
	case "data_dir":
		c.DataDir = v
	case "redis":
		c.Redis = v
	case "redis_layout":
		c.RedisLayout = v
	case "redis_prefix":
		c.RedisPrefix = v
	case "redis_tls_ca":
		c.RedisTLSCA = v
	case "redis_tls_cert":
		c.RedisTLSCert = v
	case "redis_tls_key":
		c.RedisTLSKey = v
	case "redis_shards":
		m, err := parseShards(v)
		if err != nil {
			return err
		}
		c.RedisShards = m
	case "redis_classic_pubsub":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not a boolean: %q (want true or false)", v)
		}
		c.RedisClassicPubSub = b
	case "wait_replicas":
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		c.WaitReplicas = n
	case "wait_timeout":
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		c.WaitTimeout = Duration(d)
	case "max_body_bytes", "max_inflight_bytes", "min_body_rate":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		switch key {
		case "max_body_bytes":
			c.MaxBodyBytes = n
		case "max_inflight_bytes":
			c.MaxInflightBytes = n
		default:
			c.MinBodyRate = n
		}
	case "tokens", "read_tokens", "write_tokens", "admin_tokens":
		list, err := splitTokens(v)
		if err != nil {
			return err
		}
		for _, k := range c.tokenKeys() {
			if k.key == key {
				*k.list = list
			}
		}
	case "allowed_hosts":
		c.AllowedHosts = nil
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				c.AllowedHosts = append(c.AllowedHosts, h)
			}
		}
	case "serve_topics":
		c.ServeTopics = []string{} // given, even empty: only the configured topics
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				c.ServeTopics = append(c.ServeTopics, t)
			}
		}
	case "metrics_max_topics":
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not an integer: %q", v)
		}
		c.MetricsMaxTopics = n
	case "discover_interval", "shutdown_timeout", "read_timeout", "metrics_sample_interval":
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		switch key {
		case "discover_interval":
			c.DiscoverInterval = Duration(d)
		case "shutdown_timeout":
			c.ShutdownTimeout = Duration(d)
		case "metrics_sample_interval":
			c.MetricsSampleInterval = Duration(d)
		default:
			c.ReadTimeout = Duration(d)
		}
	case "log_level":
		c.LogLevel = v
	case "log_format":
		c.LogFormat = v
	default:
		return fmt.Errorf("unknown key %q", key)
	}
	return nil
}

// Fill sets every unset field to its default.
func (c *Config) Fill() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.RedisLayout == "" {
		c.RedisLayout = "native"
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ServeTopics == nil {
		if c.RedisLayout == "compat" {
			c.ServeTopics = []string{}
		} else {
			c.ServeTopics = []string{"*"}
		}
	}
	if c.DiscoverInterval == 0 {
		c.DiscoverInterval = Duration(DefaultDiscover)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = Duration(DefaultShutdownTimeout)
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = Duration(DefaultReadTimeout)
	}
	if c.MetricsSampleInterval == 0 {
		c.MetricsSampleInterval = Duration(DefaultMetricsSample)
	}
	if c.MetricsMaxTopics == 0 {
		c.MetricsMaxTopics = DefaultMetricsTopics
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.LogFormat == "" {
		c.LogFormat = "text"
	}
}

// Validate checks a filled Config.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.RedisLayout {
	case "native", "compat":
	default:
		bad("redis_layout %q: want native or compat", c.RedisLayout)
	}
	if c.Redis != "" {
		if err := CheckRedisURL(c.Redis); err != nil {
			bad("redis: %v", err)
		}
	}
	if c.RedisLayout == "compat" && c.RedisPrefix != "" {
		bad("redis_prefix %q: the compat layout has fixed key names (timers_timeline:<topic>, timers_payloads:<topic>)", c.RedisPrefix)
	}
	if strings.ContainsAny(c.RedisPrefix, "{}") {
		bad("redis_prefix %q must not contain '{' or '}'", c.RedisPrefix)
	}
	if c.RedisClassicPubSub && c.Redis == "" {
		bad("redis_classic_pubsub: only the Redis store has pub/sub to choose")
	}
	if len(c.RedisShards) > 0 && (c.Redis == "" || c.RedisLayout == "compat") {
		bad("redis_shards: sharded topics need the Redis store with the native layout")
	}
	for p, n := range c.RedisShards {
		if err := checkTopicPattern(p); err != nil {
			bad("redis_shards %q: %v", p, err)
		}
		if n < 1 || n > 1024 {
			bad("redis_shards %q = %d: want 1 to 1024", p, n)
		}
	}
	if c.WaitReplicas < 0 {
		bad("wait_replicas %d is negative", c.WaitReplicas)
	}
	if c.WaitReplicas > 0 && c.Redis == "" {
		bad("wait_replicas: the embedded store has no replicas; it needs the Redis store")
	}
	if c.WaitTimeout < 0 {
		bad("wait_timeout %v is negative", c.WaitTimeout.D())
	}
	if c.MaxBodyBytes < 0 {
		bad("max_body_bytes %d is negative", c.MaxBodyBytes)
	}
	for i, p := range c.ServeTopics {
		if err := checkTopicPattern(p); err != nil {
			bad("serve_topics[%d] %q: %v", i, p, err)
		}
	}
	if c.DiscoverInterval < Duration(10*time.Millisecond) {
		bad("discover_interval %s is below 10ms", c.DiscoverInterval.D())
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout is negative")
	}
	if c.MetricsSampleInterval < Duration(10*time.Millisecond) {
		bad("metrics_sample_interval %s is below 10ms", c.MetricsSampleInterval.D())
	}
	if c.ReadTimeout < 0 {
		bad("read_timeout is negative")
	}
	if c.MaxInflightBytes < 0 {
		bad("max_inflight_bytes %d is negative", c.MaxInflightBytes)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		bad("log_format %q: want text or json", c.LogFormat)
	}
	owner := map[string]string{}
	for _, k := range c.tokenKeys() {
		for i, t := range *k.list {
			switch {
			case strings.TrimSpace(t) == "":
				bad("%s[%d] is blank (a blank token would turn auth off)", k.key, i)
			case strings.ContainsAny(t, " \t\r\n,"):
				bad("%s[%d] has a space or a comma", k.key, i)
			case owner[t] != "":
				bad("%s[%d] is also in %s: give each token one role", k.key, i, owner[t])
			default:
				owner[t] = k.key
			}
		}
	}
	for i, h := range c.AllowedHosts {
		if h == "*" {
			continue
		}
		if err := checkHostName(strings.TrimPrefix(h, "*.")); err != nil {
			bad("allowed_hosts[%d] %q: %v", i, h, err)
		}
	}
	if err := c.checkTopic("defaults", c.Defaults); err != nil {
		errs = append(errs, err)
	}
	c.checkSchedules(bad)
	for name, t := range c.Topics {
		if err := wire.ValidateTopic(name); err != nil {
			bad("topics.%s: %v", name, err)
			continue
		}
		if err := c.checkTopic("topics."+name, t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Config) checkTopic(where string, t Topic) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(where+": "+format, args...))
	}
	if t.Concurrency < 0 {
		bad("concurrency %d is negative", t.Concurrency)
	}
	if t.Lease != 0 && t.Lease < Duration(10*time.Millisecond) {
		bad("lease %s is below 10ms", t.Lease.D())
	}
	if t.WatchWindow < 0 || t.WatchWindow > MaxWatchWindow {
		bad("watch_window %d: want 1 to %d (0: the default, %d)", t.WatchWindow, MaxWatchWindow, DefaultWatchWindow)
	}
	r := t.Retry
	if r.MinDelay < 0 || r.MaxDelay < 0 {
		bad("retry delays must not be negative")
	}
	if r.MaxDelay != 0 && r.MinDelay > r.MaxDelay {
		bad("retry.min_delay %s is above retry.max_delay %s", r.MinDelay.D(), r.MaxDelay.D())
	}
	if r.Multiplier != 0 && r.Multiplier < 1 {
		bad("retry.multiplier %g is below 1", r.Multiplier)
	}
	if r.Jitter > 1 {
		bad("retry.jitter %g is above 1", r.Jitter)
	}
	if r.MaxAttempts < -1 {
		bad("retry.max_attempts %d: want >= 1, 0 (the default, 25) or -1 (retry forever)", r.MaxAttempts)
	}
	if tg := t.Target; tg != nil {
		switch tg.Type {
		case TargetLog:
		case TargetHTTP:
			u, err := url.Parse(tg.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad("target.url %q: want an http:// or https:// URL", tg.URL)
			}
			if tg.Timeout < 0 {
				bad("target.timeout is negative")
			}
			if err := checkWebhook(tg); err != nil {
				bad("%v", err)
			}
		case TargetRedisStream:
			if tg.Redis == "" && c.Redis == "" {
				bad("target.redis: a Redis URL is needed when the store is not Redis")
			}
			if tg.Redis != "" {
				if err := CheckRedisURL(tg.Redis); err != nil {
					bad("target.redis: %v", err)
				}
			}
			if tg.MaxLen < 0 {
				bad("target.maxlen is negative")
			}
		case TargetKafka:
			if len(tg.Brokers) == 0 {
				bad("target.brokers: a kafka target needs its brokers (host:port)")
			}
			for _, b := range tg.Brokers {
				if i := strings.LastIndexByte(b, ':'); i <= 0 || i == len(b)-1 {
					bad("target.brokers: %q: want host:port", b)
				}
			}
			if tg.KafkaTopic != "" {
				if err := kafkadelay.ValidTopic(tg.KafkaTopic); err != nil {
					bad("target.kafka_topic: %v", err)
				}
			}
			switch k := tg.Key; {
			case k == "", k == KafkaKeyID, k == KafkaKeyCorrelationID, k == KafkaKeyNone:
			case strings.HasPrefix(k, KafkaKeyHeaderPrefix) && len(k) > len(KafkaKeyHeaderPrefix):
			default:
				bad("target.key %q: want id, correlation_id, none or header:NAME", k)
			}
		case "":
			bad("target.type is missing; want log, http, redis-stream or kafka")
		default:
			bad("target.type %q: want log, http, redis-stream or kafka", tg.Type)
		}
	}
	return errors.Join(errs...)
}

// AuthOn reports whether any token is configured.
func (c *Config) AuthOn() bool {
	return len(c.Tokens)+len(c.ReadTokens)+len(c.WriteTokens)+len(c.AdminTokens) > 0
}

// checkHostName checks an allowed_hosts name: letters, digits, '-' and
// '.', or an IP address; no port, no scheme.
func checkHostName(h string) error {
	if h == "" {
		return errors.New("empty")
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if net.ParseIP(h) != nil {
		return nil
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return fmt.Errorf("character %q: want a host name (no scheme, no port) such as ontime.example.com or *.example.com", r)
		}
	}
	return nil
}

// CheckRedisURL checks the scheme of a Redis URL.
func CheckRedisURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel", "unix":
		return nil
	}
	return fmt.Errorf("%q: want a redis://, rediss://, redis+cluster:// or redis+sentinel:// URL", s)
}

// TopicConfig returns the effective settings of a topic: its own section
// over Defaults, and the log target when neither names one.
func (c *Config) TopicConfig(name string) Topic {
	t := c.Topics[name]
	d := c.Defaults
	if t.Concurrency == 0 {
		t.Concurrency = d.Concurrency
	}
	if t.Lease == 0 {
		t.Lease = d.Lease
	}
	if t.Retry == (Retry{}) {
		t.Retry = d.Retry
	}
	if t.Target == nil {
		t.Target = d.Target
	}
	if t.WatchWindow == 0 {
		t.WatchWindow = d.WatchWindow
	}
	if t.Target == nil {
		t.Target = &Target{Type: TargetLog}
	}
	return t
}

// checkTopicPattern checks a serve_topics entry: a topic name, or a
// pattern in which * stands for any run of characters and ? for any one
// (ontimedriver.ValidatePattern, the library's rules for HandleTopics).
func checkTopicPattern(p string) error {
	if !strings.ContainsAny(p, "*?") {
		return wire.ValidateTopic(p)
	}
	return ontimedriver.ValidatePattern(p)
}

// Serves reports whether topic is delivered by this server: configured in
// [topics.NAME], or matching an entry of ServeTopics.
func (c *Config) Serves(topic string) bool {
	if _, ok := c.Topics[topic]; ok {
		return true
	}
	for _, p := range c.ServeTopics {
		if ontimedriver.MatchTopic(p, topic) {
			return true
		}
	}
	return false
}

// parseShards reads redis_shards from the environment or a flag:
// comma-separated "topic-or-pattern=count".
func parseShards(v string) (map[string]int, error) {
	m := map[string]int{}
	for _, kv := range strings.Split(v, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, n, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want topic=count", kv)
		}
		c, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil {
			return nil, fmt.Errorf("%q: the count is not an integer", kv)
		}
		m[strings.TrimSpace(k)] = c
	}
	return m, nil
}
