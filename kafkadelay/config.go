package kafkadelay

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/twmb/franz-go/pkg/kgo"
)

// FileConfig is a republisher's configuration as read from TOML by
// [LoadConfig]. It accepts the layout of the reference design's settings
// (a "delay topics strategy" republisher section) as it is:
//
//	[default.integration.messaging.republisher]
//	enabled = true
//	delay_strategy_backend = "kafka_topic_delay_strategy"
//
//	[default.integration.messaging.republisher.consumer]
//	bootstrap_servers = ["localhost:9092"]
//	group_id = "nala-global-republisher-group"
//
//	[default.integration.messaging.republisher.producer]
//	bootstrap_servers = ["localhost:9092"]
//
//	[default.integration.messaging.republisher.delay_topics]
//	60 = "platform.internal.delay-1m.v1"
//	300 = "platform.internal.delay-5m.v1"
//	3600 = "platform.internal.delay-1h.v1"
//
// plus ontime's own keys in the same section, all optional:
//
//	dead_letter_topic = "ontime.delay.dead-letters" # the default
//	prefetch = "1s"           # Config.Prefetch
//	max_in_flight = 10000     # Config.MaxInFlight
//	commit_interval = "200ms" # Config.CommitInterval
//	retry_min = "100ms"       # Config.RetryMin
//	retry_max = "5s"          # Config.RetryMax
//	revoke_wait = "5s"        # Config.RevokeWait
//	client_id = "ontime-republisher"
//	stats_interval = "1m"     # a log line of per-partition stats; "0s" turns it off
//	create_destinations = false         # Config.CreateDestinations
//	destination_partitions = 6          # of the topics it creates; default: the cluster's
//	destination_replication_factor = 3  # of the topics it creates; default: the cluster's
//
// Delays are seconds, whole or decimal ("0.5" = 500ms), listed in
// increasing order; bootstrap_servers is a list or a comma-separated
// string. A producer section whose brokers differ from the consumer's
// makes the republisher produce released records to that cluster
// (re-routes and dead letters stay on the bucket cluster).
type FileConfig struct {
	// Section is the dotted path of the table the configuration was read
	// from ("" for the file's top level).
	Section string
	// Ladder is the delay_topics table.
	Ladder *Ladder
	// Brokers and Group are consumer.bootstrap_servers and
	// consumer.group_id.
	Brokers []string
	Group   string
	// DestinationBrokers is producer.bootstrap_servers when it names
	// other brokers than the consumer's; nil otherwise.
	DestinationBrokers []string
	// DeadLetterTopic, Prefetch, MaxInFlight, CommitInterval, RetryMin,
	// RetryMax and RevokeWait are the fields of Config of the same name.
	DeadLetterTopic                              string
	Prefetch, CommitInterval, RetryMin, RetryMax time.Duration
	RevokeWait                                   time.Duration
	MaxInFlight                                  int
	// ClientID is the franz-go client id. Default "ontime-republisher".
	ClientID string
	// StatsInterval is how often the republisher binary logs its
	// per-partition stats. Default 1m; 0 turns the line off.
	StatsInterval time.Duration
	// CreateDestinations, DestinationPartitions and
	// DestinationReplicationFactor are the fields of Config of the same
	// name (create_destinations, destination_partitions,
	// destination_replication_factor); 0 is the cluster's default.
	CreateDestinations           bool
	DestinationPartitions        int32
	DestinationReplicationFactor int16
}

// DefaultDeadLetterTopic is the dead-letter topic when the configuration
// names none.
const DefaultDeadLetterTopic = "ontime.delay.dead-letters"

// LoadConfig reads a TOML file and returns the republisher configuration of
// one of its tables. section is the table's dotted path, such as
// "default.integration.messaging.republisher"; "" picks the one table of
// the file that has a delay_topics table (the top level included) and
// fails if there are none or several. Every error names the file and key.
func LoadConfig(path, section string) (*FileConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kafkadelay: %w", err)
	}
	fc, err := ParseConfig(data, section)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fc, nil
}

// ParseConfig is LoadConfig on the file's contents.
func ParseConfig(data []byte, section string) (*FileConfig, error) {
	var root map[string]any
	md, err := toml.Decode(string(data), &root)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	path, tbl, err := findSection(root, section)
	if err != nil {
		return nil, err
	}
	p := &parser{md: md, path: path}
	return p.parse(tbl)
}

// findSection returns the table at the dotted path section, or the one
// table with a delay_topics table when section is "".
func findSection(root map[string]any, section string) ([]string, map[string]any, error) {
	if section != "" {
		parts := strings.Split(section, ".")
		cur := root
		for i, k := range parts {
			next, ok := cur[k].(map[string]any)
			if !ok {
				return nil, nil, fmt.Errorf("%w: no table [%s] in the file", ErrInvalid, strings.Join(parts[:i+1], "."))
			}
			cur = next
		}
		return parts, cur, nil
	}
	var found [][]string
	var walk func(prefix []string, t map[string]any)
	walk = func(prefix []string, t map[string]any) {
		if _, ok := t["delay_topics"]; ok {
			found = append(found, slices.Clone(prefix))
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "delay_topics" {
				continue
			}
			if sub, ok := t[k].(map[string]any); ok {
				walk(append(prefix, k), sub)
			}
		}
	}
	walk(nil, root)
	switch len(found) {
	case 0:
		return nil, nil, fmt.Errorf("%w: no delay_topics table in the file", ErrInvalid)
	case 1:
		cur := root
		for _, k := range found[0] {
			cur = cur[k].(map[string]any)
		}
		return found[0], cur, nil
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = "[" + strings.Join(f, ".") + "]"
	}
	return nil, nil, fmt.Errorf("%w: several tables have a delay_topics table (%s); choose one with the section (--section)",
		ErrInvalid, strings.Join(names, ", "))
}

type parser struct {
	md   toml.MetaData
	path []string
}

// key names a key of the section for error messages.
func (p *parser) key(k ...string) string {
	return toml.Key(append(slices.Clone(p.path), k...)).String()
}

func (p *parser) errf(key, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, key, fmt.Sprintf(format, args...))
}

func (p *parser) parse(tbl map[string]any) (*FileConfig, error) {
	fc := &FileConfig{Section: strings.Join(p.path, "."), DeadLetterTopic: DefaultDeadLetterTopic,
		ClientID: "ontime-republisher", StatsInterval: time.Minute}
	keys := make([]string, 0, len(tbl))
	for k := range tbl {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var consumer, producer map[string]any
	for _, k := range keys {
		v := tbl[k]
		var err error
		switch k {
		case "delay_topics":
			dt, ok := v.(map[string]any)
			if !ok {
				return nil, p.errf(p.key(k), "want a table of seconds = \"topic\"")
			}
			fc.Ladder, err = p.ladder(dt)
		case "consumer":
			if consumer, _ = v.(map[string]any); consumer == nil {
				return nil, p.errf(p.key(k), "want a table")
			}
		case "producer":
			if producer, _ = v.(map[string]any); producer == nil {
				return nil, p.errf(p.key(k), "want a table")
			}
		case "enabled":
			b, ok := v.(bool)
			switch {
			case !ok:
				err = p.errf(p.key(k), "want true or false")
			case !b:
				err = p.errf(p.key(k), "the republisher is disabled (enabled = false)")
			}
		case "delay_strategy_backend":
			if s, _ := v.(string); s != "kafka_topic_delay_strategy" {
				err = p.errf(p.key(k), "%v: only \"kafka_topic_delay_strategy\" is supported", v)
			}
		case "dead_letter_topic":
			fc.DeadLetterTopic, err = p.topic(k, v)
		case "client_id":
			s, ok := v.(string)
			if !ok || s == "" {
				err = p.errf(p.key(k), "want a non-empty string")
			}
			fc.ClientID = s
		case "max_in_flight":
			n, ok := v.(int64)
			if !ok || n < 1 || n > math.MaxInt32 {
				err = p.errf(p.key(k), "%v: want a whole number of records, at least 1", v)
			}
			fc.MaxInFlight = int(n)
		case "prefetch":
			fc.Prefetch, err = p.duration(k, v, false)
		case "commit_interval":
			fc.CommitInterval, err = p.duration(k, v, false)
		case "retry_min":
			fc.RetryMin, err = p.duration(k, v, false)
		case "retry_max":
			fc.RetryMax, err = p.duration(k, v, false)
		case "revoke_wait":
			fc.RevokeWait, err = p.duration(k, v, false)
		case "stats_interval":
			fc.StatsInterval, err = p.duration(k, v, true)
		case "create_destinations":
			b, ok := v.(bool)
			if !ok {
				err = p.errf(p.key(k), "want true or false")
			}
			fc.CreateDestinations = b
		case "destination_partitions":
			n, ok := v.(int64)
			if !ok || n < 1 || n > math.MaxInt32 {
				err = p.errf(p.key(k), "%v: want a whole number of partitions, at least 1", v)
			}
			fc.DestinationPartitions = int32(n)
		case "destination_replication_factor":
			n, ok := v.(int64)
			if !ok || n < 1 || n > math.MaxInt16 {
				err = p.errf(p.key(k), "%v: want a whole number of replicas, at least 1", v)
			}
			fc.DestinationReplicationFactor = int16(n)
		default:
			err = p.errf(p.key(k), "unknown key")
		}
		if err != nil {
			return nil, err
		}
	}
	if fc.Ladder == nil {
		return nil, p.errf(p.key("delay_topics"), "missing: no delay buckets")
	}
	if consumer == nil {
		return nil, p.errf(p.key("consumer", "bootstrap_servers"), "missing: the brokers of the bucket topics")
	}
	var err error
	for _, k := range sortedKeys(consumer) {
		switch k {
		case "bootstrap_servers":
			fc.Brokers, err = p.brokers(consumer[k], "consumer", k)
		case "group_id":
			s, ok := consumer[k].(string)
			if !ok || s == "" {
				err = p.errf(p.key("consumer", k), "want a non-empty string")
			}
			fc.Group = s
		default:
			err = p.errf(p.key("consumer", k), "unknown key")
		}
		if err != nil {
			return nil, err
		}
	}
	if len(fc.Brokers) == 0 {
		return nil, p.errf(p.key("consumer", "bootstrap_servers"), "missing: the brokers of the bucket topics")
	}
	if fc.Group == "" {
		return nil, p.errf(p.key("consumer", "group_id"), "missing: the republishers' consumer group")
	}
	for _, k := range sortedKeys(producer) {
		switch k {
		case "bootstrap_servers":
			var pb []string
			if pb, err = p.brokers(producer[k], "producer", k); err == nil && !sameSet(pb, fc.Brokers) {
				fc.DestinationBrokers = pb
			}
		default:
			err = p.errf(p.key("producer", k), "unknown key")
		}
		if err != nil {
			return nil, err
		}
	}
	if _, isBucket := fc.Ladder.Bucket(fc.DeadLetterTopic); isBucket {
		return nil, p.errf(p.key("dead_letter_topic"), "%q is also a bucket topic", fc.DeadLetterTopic)
	}
	return fc, nil
}

// ladder reads delay_topics in file order: increasing delays, each used
// once, each topic used once.
func (p *parser) ladder(dt map[string]any) (*Ladder, error) {
	if len(dt) == 0 {
		return nil, p.errf(p.key("delay_topics"), "empty: no delay buckets")
	}
	// The file's order, which a map loses: MetaData.Keys lists keys as
	// they appear.
	var order []string
	prefix := len(p.path) + 1
	for _, k := range p.md.Keys() {
		if len(k) == prefix+1 && slices.Equal(k[:len(p.path)], p.path) && k[len(p.path)] == "delay_topics" {
			order = append(order, k[prefix])
		}
	}
	var buckets []Bucket
	seen := make(map[time.Duration]string)
	topics := make(map[string]string)
	for _, k := range order {
		key := p.key("delay_topics", k)
		d, err := parseSeconds(k)
		if err != nil {
			return nil, p.errf(key, "%v", err)
		}
		if prev, dup := seen[d]; dup {
			return nil, p.errf(key, "the same delay as %q", prev)
		}
		if n := len(buckets); n > 0 && d < buckets[n-1].Delay {
			return nil, p.errf(key, "delays must be in increasing order: %v comes after %v", d, buckets[n-1].Delay)
		}
		name, ok := dt[k].(string)
		if !ok {
			return nil, p.errf(key, "want a topic name")
		}
		if err := ValidTopic(name); err != nil {
			return nil, p.errf(key, "%v", strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
		}
		if prev, dup := topics[name]; dup {
			return nil, p.errf(key, "topic %q is already the bucket of delay %s", name, prev)
		}
		seen[d], topics[name] = k, k
		buckets = append(buckets, Bucket{Delay: d, Topic: name})
	}
	return NewLadder(buckets...)
}

// parseSeconds reads a delay key: seconds, whole or decimal, greater than
// zero, at millisecond precision.
func parseSeconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a number of seconds", s)
	}
	if f <= 0 {
		return 0, fmt.Errorf("delay %s must be greater than zero", s)
	}
	if f > 100*365*24*3600 {
		return 0, fmt.Errorf("delay %s is more than 100 years", s)
	}
	d := time.Duration(math.Round(f*1000)) * time.Millisecond
	if d < time.Millisecond {
		return 0, fmt.Errorf("delay %s is less than a millisecond", s)
	}
	return d, nil
}

func (p *parser) topic(k string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", p.errf(p.key(k), "want a topic name")
	}
	if err := ValidTopic(s); err != nil {
		return "", p.errf(p.key(k), "%v", strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
	}
	return s, nil
}

func (p *parser) duration(k string, v any, zeroOK bool) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, p.errf(p.key(k), "want a duration string such as \"500ms\" or \"2s\"")
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, p.errf(p.key(k), "%v", err)
	}
	if d < 0 || d == 0 && !zeroOK {
		return 0, p.errf(p.key(k), "%s: want a positive duration", s)
	}
	return d, nil
}

// brokers reads bootstrap_servers: a list of host:port, or one string of
// them separated by commas.
func (p *parser) brokers(v any, k ...string) ([]string, error) {
	var raw []string
	switch v := v.(type) {
	case string:
		raw = strings.Split(v, ",")
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, p.errf(p.key(k...), "want a list of \"host:port\" strings")
			}
			raw = append(raw, s)
		}
	default:
		return nil, p.errf(p.key(k...), "want a list of \"host:port\" strings")
	}
	var out []string
	for _, s := range raw {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if i := strings.LastIndexByte(s, ':'); i <= 0 || i == len(s)-1 {
			return nil, p.errf(p.key(k...), "%q: want host:port", s)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, p.errf(p.key(k...), "empty: no brokers")
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// Config returns the republisher Config the file describes, with the
// given observer and logger, and the franz-go options of its clients.
func (fc *FileConfig) Config(obs Observer, log *slog.Logger) (Config, []kgo.Opt) {
	cfg := Config{
		Ladder:                       fc.Ladder,
		Group:                        fc.Group,
		DeadLetterTopic:              fc.DeadLetterTopic,
		Prefetch:                     fc.Prefetch,
		MaxInFlight:                  fc.MaxInFlight,
		CommitInterval:               fc.CommitInterval,
		RetryMin:                     fc.RetryMin,
		RetryMax:                     fc.RetryMax,
		RevokeWait:                   fc.RevokeWait,
		CreateDestinations:           fc.CreateDestinations,
		DestinationPartitions:        fc.DestinationPartitions,
		DestinationReplicationFactor: fc.DestinationReplicationFactor,
		Observer:                     obs,
		Logger:                       log,
	}
	if fc.DestinationBrokers != nil {
		cfg.DestinationOpts = []kgo.Opt{kgo.SeedBrokers(fc.DestinationBrokers...), kgo.ClientID(fc.ClientID)}
	}
	return cfg, []kgo.Opt{kgo.SeedBrokers(fc.Brokers...), kgo.ClientID(fc.ClientID)}
}
