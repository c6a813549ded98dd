package kafkaconfig_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/kafkadelay"
	"github.com/ontime-go/ontime/kafkadelay/kafkaconfig"
)

// The reference design's settings section, as a team has it.
const referenceSettings = `
[default.integration.messaging.republisher]
enabled = true
delay_strategy_backend = "kafka_topic_delay_strategy"

[default.integration.messaging.republisher.consumer]
bootstrap_servers = ["localhost:9092"]
group_id = "nala-global-republisher-group"

[default.integration.messaging.republisher.producer]
bootstrap_servers = ["localhost:9092"]

[default.integration.messaging.republisher.delay_topics]
60 = "platform.internal.delay-1m.v1"
300 = "platform.internal.delay-5m.v1"
3600 = "platform.internal.delay-1h.v1"

[default.integration.messaging.other]
unrelated = 1
`

func TestConfigReferenceLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.toml")
	if err := os.WriteFile(path, []byte(referenceSettings), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, section := range []string{"", "default.integration.messaging.republisher"} {
		fc, err := kafkaconfig.Load(path, section)
		if err != nil {
			t.Fatalf("section %q: %v", section, err)
		}
		if fc.Section != "default.integration.messaging.republisher" {
			t.Errorf("section %q", fc.Section)
		}
		want := []kafkadelay.Bucket{
			{Delay: time.Minute, Topic: "platform.internal.delay-1m.v1"},
			{Delay: 5 * time.Minute, Topic: "platform.internal.delay-5m.v1"},
			{Delay: time.Hour, Topic: "platform.internal.delay-1h.v1"},
		}
		got := fc.Ladder.Buckets()
		if len(got) != len(want) {
			t.Fatalf("buckets %v", got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("bucket %d: %+v, want %+v", i, got[i], want[i])
			}
		}
		if fc.Group != "nala-global-republisher-group" || len(fc.Brokers) != 1 || fc.Brokers[0] != "localhost:9092" {
			t.Errorf("consumer: %q %v", fc.Group, fc.Brokers)
		}
		if fc.DestinationBrokers != nil {
			t.Errorf("producer brokers equal to the consumer's should not make a second client: %v", fc.DestinationBrokers)
		}
		if fc.DeadLetterTopic != kafkadelay.DefaultDeadLetterTopic {
			t.Errorf("dead-letter topic %q", fc.DeadLetterTopic)
		}
	}
}

func TestConfigOntimeKeys(t *testing.T) {
	fc, err := kafkaconfig.Parse([]byte(`
dead_letter_topic = "dlq"
prefetch = "300ms"
max_in_flight = 500
commit_interval = "1s"
retry_min = "50ms"
retry_max = "2s"
revoke_wait = "3s"
client_id = "r1"
stats_interval = "0s"
read_ahead = 200
create_destinations = true
destination_partitions = 6
destination_replication_factor = 3
[consumer]
bootstrap_servers = "a:9092, b:9092"
group_id = "g"
session_timeout = "3s"
heartbeat_interval = "1s"
rebalance_strategy = "range"
[producer]
bootstrap_servers = ["c:9092"]
[delay_topics]
"0.5" = "d-500ms"
1 = "d-1s"
`), "")
	if err != nil {
		t.Fatal(err)
	}
	if fc.Section != "" || fc.DeadLetterTopic != "dlq" || fc.Prefetch != 300*time.Millisecond || fc.MaxInFlight != 500 ||
		fc.CommitInterval != time.Second || fc.RetryMin != 50*time.Millisecond || fc.RetryMax != 2*time.Second ||
		fc.RevokeWait != 3*time.Second || fc.ClientID != "r1" || fc.StatsInterval != 0 || fc.ReadAhead != 200 ||
		fc.SessionTimeout != 3*time.Second || fc.HeartbeatInterval != time.Second || fc.RebalanceStrategy != "range" ||
		!fc.CreateDestinations || fc.DestinationPartitions != 6 || fc.DestinationReplicationFactor != 3 {
		t.Errorf("parsed %+v", fc)
	}
	if strings.Join(fc.Brokers, ",") != "a:9092,b:9092" || strings.Join(fc.DestinationBrokers, ",") != "c:9092" {
		t.Errorf("brokers %v, destination brokers %v", fc.Brokers, fc.DestinationBrokers)
	}
	if b := fc.Ladder.Buckets(); b[0].Delay != 500*time.Millisecond || b[1].Delay != time.Second {
		t.Errorf("buckets %v", b)
	}
}

// Each bad configuration gets an error naming the key.
func TestConfigErrors(t *testing.T) {
	const ok = `
[consumer]
bootstrap_servers = ["k:9092"]
group_id = "g"
`
	cases := []struct {
		name, toml, section, want string
	}{
		{"unsorted", ok + "[delay_topics]\n300 = \"a\"\n60 = \"b\"\n", "", `delay_topics.60: delays must be in increasing order: 1m0s comes after 5m0s`},
		{"duplicate delay", ok + "[delay_topics]\n60 = \"a\"\n\"60.0\" = \"b\"\n", "", `delay_topics."60.0": the same delay as "60"`},
		{"zero delay", ok + "[delay_topics]\n0 = \"a\"\n", "", `delay_topics.0: delay 0 must be greater than zero`},
		{"negative delay", ok + "[delay_topics]\n-5 = \"a\"\n", "", `delay_topics.-5: delay -5 must be greater than zero`},
		{"not a number", ok + "[delay_topics]\nsoon = \"a\"\n", "", `delay_topics.soon: "soon" is not a number of seconds`},
		{"topic twice", ok + "[delay_topics]\n1 = \"a\"\n5 = \"a\"\n", "", `delay_topics.5: topic "a" is already the bucket of delay 1`},
		{"bad topic", ok + "[delay_topics]\n1 = \"a b\"\n", "", `delay_topics.1: topic name "a b" has character ' '`},
		{"no buckets", ok + "[delay_topics]\n", "", `delay_topics: empty: no delay buckets`},
		{"no delay_topics", ok, "", `no delay_topics table in the file`},
		{"missing brokers", "[delay_topics]\n1 = \"a\"\n", "", `consumer.bootstrap_servers: missing`},
		{"empty brokers", "[consumer]\nbootstrap_servers = []\ngroup_id = \"g\"\n[delay_topics]\n1 = \"a\"\n", "", `consumer.bootstrap_servers: empty: no brokers`},
		{"bad broker", "[consumer]\nbootstrap_servers = [\"nohost\"]\ngroup_id = \"g\"\n[delay_topics]\n1 = \"a\"\n", "", `consumer.bootstrap_servers: "nohost": want host:port`},
		{"missing group", "[consumer]\nbootstrap_servers = [\"k:1\"]\n[delay_topics]\n1 = \"a\"\n", "", `consumer.group_id: missing`},
		{"unknown key", ok + "dead_letter = \"x\"\n[delay_topics]\n1 = \"a\"\n", "", `dead_letter: unknown key`},
		{"disabled", ok + "[delay_topics]\n1 = \"a\"\n", "", ""}, // placeholder replaced below
		{"bad duration", "prefetch = \"soon\"\n" + ok + "[delay_topics]\n1 = \"a\"\n", "", `prefetch: time: invalid duration "soon" (line 1)`},
		{"dlq is a bucket", "dead_letter_topic = \"a\"\n" + ok + "[delay_topics]\n1 = \"a\"\n", "", `dead_letter_topic: "a" is also a bucket topic`},
		{"bad section", ok + "[delay_topics]\n1 = \"a\"\n", "x.y", `no table [x] in the file`},
		{"two sections", "[a.delay_topics]\n1 = \"a\"\n[b.delay_topics]\n1 = \"b\"\n", "", `several tables have a delay_topics table ([a], [b])`},
		{"not toml", "[delay_topics\n", "", `toml:`},
		{"bad strategy", ok + "rebalance_strategy = \"fair\"\n[delay_topics]\n1 = \"a\"\n", "", `consumer.rebalance_strategy: fair: want one of cooperative-sticky`},
		{"heartbeat too long", ok + "session_timeout = \"2s\"\nheartbeat_interval = \"2s\"\n[delay_topics]\n1 = \"a\"\n", "", `consumer.heartbeat_interval: 2s must be less than the session timeout (2s)`},
		{"bad session", ok + "session_timeout = 6\n[delay_topics]\n1 = \"a\"\n", "", `consumer.session_timeout: time: missing unit in duration "6"`},
		{"create not bool", "create_destinations = \"yes\"\n" + ok + "[delay_topics]\n1 = \"a\"\n", "", `create_destinations: want true or false, not a string (line 1)`},
		{"zero partitions", "destination_partitions = 0\n" + ok + "[delay_topics]\n1 = \"a\"\n", "", `destination_partitions: 0: want a whole number of partitions, at least 1`},
		{"wrong type nested", ok + "[delay_topics]\n1 = 5\n", "", `delay_topics.1: want a string, not a whole number (line 6)`},
		{"unknown nested key", ok + "groupid = \"x\"\n[delay_topics]\n1 = \"a\"\n", "", `groupid: unknown key`},
		{"unknown consumer key", "[r.consumer]\nbootstrap_servers = [\"k:1\"]\ngroup_id = \"g\"\ngroupid = \"x\"\n[r.delay_topics]\n1 = \"a\"\n", "", `r.consumer.groupid: unknown key`},
		{"brokers not strings", "[consumer]\nbootstrap_servers = [1]\ngroup_id = \"g\"\n[delay_topics]\n1 = \"a\"\n", "", `consumer.bootstrap_servers: want a list of "host:port" strings`},
		{"huge replication", "destination_replication_factor = 70000\n" + ok + "[delay_topics]\n1 = \"a\"\n", "", `destination_replication_factor: 70000: want a whole number of replicas, at least 1`},
	}
	cases[14] = struct{ name, toml, section, want string }{"disabled",
		"[r]\nenabled = false\n[r.consumer]\nbootstrap_servers = [\"k:1\"]\ngroup_id = \"g\"\n[r.delay_topics]\n1 = \"a\"\n", "r",
		`r.enabled: the republisher is disabled (enabled = false)`}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kafkaconfig.Parse([]byte(tc.toml), tc.section)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !errors.Is(err, kafkadelay.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
