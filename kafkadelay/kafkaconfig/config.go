// Package kafkaconfig reads a [kafkadelay.Republisher]'s configuration from
// TOML, in the layout of the reference "delay topics strategy" settings
// (accepted as it is) plus ontime's own keys. It is a package of its own so
// that users of kafkadelay's Producer and Republisher do not import a TOML
// decoder (BurntSushi/toml); `ontime republish --config FILE` uses it.
//
// The layout, in any table of the file:
//
//	[default.integration.messaging.republisher]
//	enabled = true
//	delay_strategy_backend = "kafka_topic_delay_strategy"
//
//	[default.integration.messaging.republisher.consumer]
//	bootstrap_servers = ["localhost:9092"]
//	group_id = "nala-global-republisher-group"
//
//	# optional, ontime's: the group's timing (Config.SessionTimeout, ...)
//	session_timeout = "6s"
//	heartbeat_interval = "500ms"
//	rebalance_strategy = "cooperative-sticky"
//
//	[default.integration.messaging.republisher.producer]
//	bootstrap_servers = ["localhost:9092"]
//
//	[default.integration.messaging.republisher.delay_topics]
//	60 = "platform.internal.delay-1m.v1"
//	300 = "platform.internal.delay-5m.v1"
//	3600 = "platform.internal.delay-1h.v1"
//
// plus ontime's own keys in the same table, all optional:
//
//	dead_letter_topic = "ontime.delay.dead-letters" # the default
//	prefetch = "1s"           # Config.Prefetch
//	max_in_flight = 10000     # Config.MaxInFlight
//	read_ahead = 1000         # Config.ReadAhead
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
//
// The table is decoded into tagged structs; keys the structs do not have
// are errors (found with the decoder's own metadata), and every error
// names the key.
package kafkaconfig

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ontime-go/ontime/kafkadelay"
)

// FileConfig is a republisher's configuration as read by [Load].
type FileConfig struct {
	// Section is the dotted path of the table the configuration was read
	// from ("" for the file's top level).
	Section string
	// Ladder is the delay_topics table.
	Ladder *kafkadelay.Ladder
	// Brokers and Group are consumer.bootstrap_servers and
	// consumer.group_id.
	Brokers []string
	Group   string
	// DestinationBrokers is producer.bootstrap_servers when it names
	// other brokers than the consumer's; nil otherwise.
	DestinationBrokers []string
	// DeadLetterTopic, Prefetch, MaxInFlight, CommitInterval, RetryMin,
	// RetryMax and RevokeWait are the fields of kafkadelay.Config of the
	// same name.
	DeadLetterTopic                              string
	Prefetch, CommitInterval, RetryMin, RetryMax time.Duration
	RevokeWait                                   time.Duration
	MaxInFlight                                  int
	// ReadAhead is Config.ReadAhead.
	ReadAhead int
	// SessionTimeout, HeartbeatInterval and RebalanceStrategy are
	// consumer.session_timeout, consumer.heartbeat_interval and
	// consumer.rebalance_strategy: the Config fields of the same name.
	SessionTimeout, HeartbeatInterval time.Duration
	RebalanceStrategy                 string
	// ClientID is the franz-go client id. Default "ontime-republisher".
	ClientID string
	// StatsInterval is how often the republisher binary logs its
	// per-partition stats. Default 1m; 0 turns the line off.
	StatsInterval time.Duration
	// CreateDestinations, DestinationPartitions and
	// DestinationReplicationFactor are the fields of kafkadelay.Config of
	// the same name (create_destinations, destination_partitions,
	// destination_replication_factor); 0 is the cluster's default.
	CreateDestinations           bool
	DestinationPartitions        int32
	DestinationReplicationFactor int16
}

// section is the TOML layout of a republisher's table.
type section struct {
	Enabled                      *bool             `toml:"enabled"`
	DelayStrategyBackend         *string           `toml:"delay_strategy_backend"`
	DelayTopics                  map[string]string `toml:"delay_topics"`
	Consumer                     *consumerTable    `toml:"consumer"`
	Producer                     *producerTable    `toml:"producer"`
	DeadLetterTopic              *string           `toml:"dead_letter_topic"`
	ClientID                     *string           `toml:"client_id"`
	MaxInFlight                  *int64            `toml:"max_in_flight"`
	ReadAhead                    *int64            `toml:"read_ahead"`
	Prefetch                     *duration         `toml:"prefetch"`
	CommitInterval               *duration         `toml:"commit_interval"`
	RetryMin                     *duration         `toml:"retry_min"`
	RetryMax                     *duration         `toml:"retry_max"`
	RevokeWait                   *duration         `toml:"revoke_wait"`
	StatsInterval                *duration         `toml:"stats_interval"`
	CreateDestinations           bool              `toml:"create_destinations"`
	DestinationPartitions        *int64            `toml:"destination_partitions"`
	DestinationReplicationFactor *int64            `toml:"destination_replication_factor"`
}

type consumerTable struct {
	BootstrapServers  *brokerList `toml:"bootstrap_servers"`
	GroupID           *string     `toml:"group_id"`
	SessionTimeout    *duration   `toml:"session_timeout"`
	HeartbeatInterval *duration   `toml:"heartbeat_interval"`
	RebalanceStrategy *string     `toml:"rebalance_strategy"`
}

type producerTable struct {
	BootstrapServers *brokerList `toml:"bootstrap_servers"`
}

// duration is a TOML string such as "500ms" or "2s".
type duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = duration(v)
	return err
}

// brokerList is bootstrap_servers: a list of "host:port" strings, or one
// string of them separated by commas.
type brokerList []string

// UnmarshalTOML implements toml.Unmarshaler.
func (b *brokerList) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		*b = strings.Split(v, ",")
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("want a list of \"host:port\" strings")
			}
			*b = append(*b, s)
		}
	default:
		return fmt.Errorf("want a list of \"host:port\" strings")
	}
	return nil
}

// Load reads a TOML file and returns the republisher configuration of one
// of its tables. section is the table's dotted path, such as
// "default.integration.messaging.republisher"; "" picks the one table of
// the file that has a delay_topics table (the top level included) and
// fails if there are none or several. Every error names the file and key
// and wraps [kafkadelay.ErrInvalid].
func Load(path, section string) (*FileConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kafkaconfig: %w", err)
	}
	fc, err := Parse(data, section)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fc, nil
}

// Parse is Load on the file's contents.
func Parse(data []byte, sectionPath string) (*FileConfig, error) {
	var root map[string]any
	if _, err := toml.Decode(string(data), &root); err != nil {
		return nil, fmt.Errorf("%w: %v", kafkadelay.ErrInvalid, err)
	}
	path, err := findSection(root, sectionPath)
	if err != nil {
		return nil, err
	}
	var sec section
	md, err := decodeSection(string(data), path, &sec)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", kafkadelay.ErrInvalid, keyFirst(err))
	}
	p := &parser{md: md, path: path}
	for _, k := range md.Undecoded() {
		if len(k) > len(path) && slices.Equal(k[:len(path)], path) {
			return nil, p.errf(k.String(), "unknown key")
		}
	}
	return p.parse(&sec)
}

// decodeErr matches the decoder's errors about a value: "toml: line N
// (last key "K"): message".
var decodeErr = regexp.MustCompile(`^toml: line (\d+) \(last key "((?:[^"\\]|\\.)*)"\): (.*)$`)

// typeErr matches the decoder's message about a value of the wrong type.
var typeErr = regexp.MustCompile(`^incompatible types: TOML value has type (\S+); destination has type (\S+)$`)

// keyFirst words a decoding error as the configuration's other errors
// are: "key: message (line N)".
func keyFirst(err error) string {
	m := decodeErr.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	msg := m[3]
	if t := typeErr.FindStringSubmatch(msg); t != nil {
		msg = fmt.Sprintf("want %s, not %s", typeName(t[2]), typeName(t[1]))
	}
	return fmt.Sprintf("%s: %s (line %s)", m[2], msg, m[1])
}

// typeName words a type of the decoder's messages.
func typeName(t string) string {
	switch t {
	case "int64", "integer":
		return "a whole number"
	case "float64", "float":
		return "a number"
	case "bool", "boolean":
		return "true or false"
	case "string":
		return "a string"
	case "map", "struct", "table":
		return "a table"
	case "slice", "array":
		return "a list"
	}
	return t
}

// decodeSection decodes the table at path into sec.
func decodeSection(data string, path []string, sec *section) (toml.MetaData, error) {
	if len(path) == 0 {
		return toml.Decode(data, sec)
	}
	var cur map[string]toml.Primitive
	md, err := toml.Decode(data, &cur)
	if err != nil {
		return md, err
	}
	for _, k := range path[:len(path)-1] {
		var next map[string]toml.Primitive
		if err := md.PrimitiveDecode(cur[k], &next); err != nil {
			return md, err
		}
		cur = next
	}
	return md, md.PrimitiveDecode(cur[path[len(path)-1]], sec)
}

// findSection returns the path of the table at the dotted path section,
// or of the one table with a delay_topics table when section is "".
func findSection(root map[string]any, section string) ([]string, error) {
	if section != "" {
		parts := strings.Split(section, ".")
		cur := root
		for i, k := range parts {
			next, ok := cur[k].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w: no table [%s] in the file", kafkadelay.ErrInvalid, strings.Join(parts[:i+1], "."))
			}
			cur = next
		}
		return parts, nil
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
		return nil, fmt.Errorf("%w: no delay_topics table in the file", kafkadelay.ErrInvalid)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = "[" + strings.Join(f, ".") + "]"
	}
	return nil, fmt.Errorf("%w: several tables have a delay_topics table (%s); choose one with the section (--section)",
		kafkadelay.ErrInvalid, strings.Join(names, ", "))
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
	return fmt.Errorf("%w: %s: %s", kafkadelay.ErrInvalid, key, fmt.Sprintf(format, args...))
}

func (p *parser) parse(s *section) (*FileConfig, error) {
	fc := &FileConfig{Section: strings.Join(p.path, "."), DeadLetterTopic: kafkadelay.DefaultDeadLetterTopic,
		ClientID: "ontime-republisher", StatsInterval: time.Minute, CreateDestinations: s.CreateDestinations}
	if s.Enabled != nil && !*s.Enabled {
		return nil, p.errf(p.key("enabled"), "the republisher is disabled (enabled = false)")
	}
	if b := s.DelayStrategyBackend; b != nil && *b != "kafka_topic_delay_strategy" {
		return nil, p.errf(p.key("delay_strategy_backend"), "%q: only \"kafka_topic_delay_strategy\" is supported", *b)
	}
	if s.DelayTopics == nil {
		return nil, p.errf(p.key("delay_topics"), "missing: no delay buckets")
	}
	var err error
	if fc.Ladder, err = p.ladder(s.DelayTopics); err != nil {
		return nil, err
	}
	if t := s.DeadLetterTopic; t != nil {
		if err := kafkadelay.ValidTopic(*t); err != nil {
			return nil, p.errf(p.key("dead_letter_topic"), "%v", trimInvalid(err))
		}
		fc.DeadLetterTopic = *t
	}
	if _, isBucket := fc.Ladder.Bucket(fc.DeadLetterTopic); isBucket {
		return nil, p.errf(p.key("dead_letter_topic"), "%q is also a bucket topic", fc.DeadLetterTopic)
	}
	if c := s.ClientID; c != nil {
		if *c == "" {
			return nil, p.errf(p.key("client_id"), "want a non-empty string")
		}
		fc.ClientID = *c
	}
	if n := s.MaxInFlight; n != nil {
		if *n < 1 || *n > math.MaxInt32 {
			return nil, p.errf(p.key("max_in_flight"), "%d: want a whole number of records, at least 1", *n)
		}
		fc.MaxInFlight = int(*n)
	}
	if n := s.ReadAhead; n != nil {
		if *n < 1 || *n > math.MaxInt32 {
			return nil, p.errf(p.key("read_ahead"), "%d: want a whole number of records, at least 1", *n)
		}
		fc.ReadAhead = int(*n)
	}
	for _, d := range []struct {
		name   string
		v      *duration
		into   *time.Duration
		zeroOK bool
	}{
		{"prefetch", s.Prefetch, &fc.Prefetch, false},
		{"commit_interval", s.CommitInterval, &fc.CommitInterval, false},
		{"retry_min", s.RetryMin, &fc.RetryMin, false},
		{"retry_max", s.RetryMax, &fc.RetryMax, false},
		{"revoke_wait", s.RevokeWait, &fc.RevokeWait, false},
		{"stats_interval", s.StatsInterval, &fc.StatsInterval, true},
	} {
		if d.v == nil {
			continue
		}
		v := time.Duration(*d.v)
		if v < 0 || v == 0 && !d.zeroOK {
			return nil, p.errf(p.key(d.name), "%v: want a positive duration", v)
		}
		*d.into = v
	}
	if n := s.DestinationPartitions; n != nil {
		if *n < 1 || *n > math.MaxInt32 {
			return nil, p.errf(p.key("destination_partitions"), "%d: want a whole number of partitions, at least 1", *n)
		}
		fc.DestinationPartitions = int32(*n)
	}
	if n := s.DestinationReplicationFactor; n != nil {
		if *n < 1 || *n > math.MaxInt16 {
			return nil, p.errf(p.key("destination_replication_factor"), "%d: want a whole number of replicas, at least 1", *n)
		}
		fc.DestinationReplicationFactor = int16(*n)
	}
	c := s.Consumer
	if c == nil || c.BootstrapServers == nil {
		return nil, p.errf(p.key("consumer", "bootstrap_servers"), "missing: the brokers of the bucket topics")
	}
	if fc.Brokers, err = p.brokers(*c.BootstrapServers, "consumer", "bootstrap_servers"); err != nil {
		return nil, err
	}
	if c.GroupID == nil {
		return nil, p.errf(p.key("consumer", "group_id"), "missing: the republishers' consumer group")
	}
	if *c.GroupID == "" {
		return nil, p.errf(p.key("consumer", "group_id"), "want a non-empty string")
	}
	fc.Group = *c.GroupID
	for _, d := range []struct {
		name string
		v    *duration
		into *time.Duration
	}{
		{"session_timeout", c.SessionTimeout, &fc.SessionTimeout},
		{"heartbeat_interval", c.HeartbeatInterval, &fc.HeartbeatInterval},
	} {
		if d.v == nil {
			continue
		}
		if v := time.Duration(*d.v); v <= 0 {
			return nil, p.errf(p.key("consumer", d.name), "%v: want a positive duration", v)
		}
		*d.into = time.Duration(*d.v)
	}
	if session := cmp.Or(fc.SessionTimeout, kafkadelay.DefaultSessionTimeout); fc.HeartbeatInterval >= session {
		return nil, p.errf(p.key("consumer", "heartbeat_interval"), "%v must be less than the session timeout (%v)", fc.HeartbeatInterval, session)
	}
	if r := c.RebalanceStrategy; r != nil {
		if !slices.Contains(kafkadelay.RebalanceStrategies, *r) {
			return nil, p.errf(p.key("consumer", "rebalance_strategy"), "%s: want one of %s", *r, strings.Join(kafkadelay.RebalanceStrategies, ", "))
		}
		fc.RebalanceStrategy = *r
	}
	if pr := s.Producer; pr != nil && pr.BootstrapServers != nil {
		pb, err := p.brokers(*pr.BootstrapServers, "producer", "bootstrap_servers")
		if err != nil {
			return nil, err
		}
		if !sameSet(pb, fc.Brokers) {
			fc.DestinationBrokers = pb
		}
	}
	return fc, nil
}

// ladder reads delay_topics in file order: increasing delays, each used
// once, each topic used once.
func (p *parser) ladder(dt map[string]string) (*kafkadelay.Ladder, error) {
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
	var buckets []kafkadelay.Bucket
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
		name := dt[k]
		if err := kafkadelay.ValidTopic(name); err != nil {
			return nil, p.errf(key, "%v", trimInvalid(err))
		}
		if prev, dup := topics[name]; dup {
			return nil, p.errf(key, "topic %q is already the bucket of delay %s", name, prev)
		}
		seen[d], topics[name] = k, k
		buckets = append(buckets, kafkadelay.Bucket{Delay: d, Topic: name})
	}
	return kafkadelay.NewLadder(buckets...)
}

// trimInvalid drops the "kafkadelay: invalid: " prefix of err's message.
func trimInvalid(err error) string {
	return strings.TrimPrefix(err.Error(), kafkadelay.ErrInvalid.Error()+": ")
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

// brokers checks bootstrap_servers: host:port entries, blanks dropped.
func (p *parser) brokers(raw brokerList, k ...string) ([]string, error) {
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

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// Config returns the republisher Config the file describes, with the
// given observer and logger, and the franz-go options of its clients.
func (fc *FileConfig) Config(obs kafkadelay.Observer, log *slog.Logger) (kafkadelay.Config, []kgo.Opt) {
	cfg := kafkadelay.Config{
		Ladder:                       fc.Ladder,
		Group:                        fc.Group,
		DeadLetterTopic:              fc.DeadLetterTopic,
		Prefetch:                     fc.Prefetch,
		MaxInFlight:                  fc.MaxInFlight,
		ReadAhead:                    fc.ReadAhead,
		SessionTimeout:               fc.SessionTimeout,
		HeartbeatInterval:            fc.HeartbeatInterval,
		RebalanceStrategy:            fc.RebalanceStrategy,
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
