package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ontime-go/ontime/kafkadelay"
	"github.com/ontime-go/ontime/kafkadelay/kafkaconfig"
	"github.com/ontime-go/ontime/kafkadelay/kafkadelayprom"
)

// kafkaConfigFlags are the flags that name a republisher configuration.
type kafkaConfigFlags struct {
	file, section string
}

func (k *kafkaConfigFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&k.file, "config", "", "TOML file with a delay_topics table (see docs/kafka.md)")
	f.StringVar(&k.section, "section", "", "dotted path of the republisher's table in the file, e.g. default.integration.messaging.republisher (default: the one table with delay_topics)")
}

func (k *kafkaConfigFlags) load() (*kafkaconfig.FileConfig, error) {
	if k.file == "" {
		return nil, usageErr("--config FILE is required")
	}
	fc, err := kafkaconfig.Load(k.file, k.section)
	if err != nil {
		return nil, &exitError{code: ExitUsage, err: err}
	}
	return fc, nil
}

func newRepublishCmd(e *env) *cobra.Command {
	var (
		k                kafkaConfigFlags
		logLevel, logFmt string
		metricsListen    string
		group            groupFlags
	)
	cmd := &cobra.Command{
		Use:   "republish --config FILE",
		Short: "Run the Kafka republisher: deliver delayed records from the bucket topics when they are due",
		Long: `republish consumes the bucket topics of a delay_topics ladder (a consumer group:
run as many as you like) and produces each record to the next bucket, or to its
destination at its due instant, never before. See docs/kafka.md.`,
		Example: `  ontime dev-kafka --config kafka.toml &      # a Kafka-protocol cluster on 127.0.0.1:9092, for trying it
  ontime republish --config kafka.toml
  ontime republish --config kafka.toml --metrics-listen 127.0.0.1:9464   # Prometheus metrics at /metrics
  ontime republish --config settings.toml --section default.integration.messaging.republisher`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc, err := k.load()
			if err != nil {
				return err
			}
			group.apply(cmd, fc)
			log := newLogger(e.stderr, logLevel, logFmt)
			var obs kafkadelay.Observer
			var km *kafkadelayprom.Metrics
			reg := prometheus.NewRegistry()
			if metricsListen != "" {
				reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				if km, err = kafkadelayprom.NewMetrics(kafkadelayprom.Registerer(reg)); err != nil {
					return err
				}
				obs = km
			}
			cfg, opts := fc.Config(obs, log)
			r, err := kafkadelay.NewRepublisher(cfg, opts...)
			if err != nil {
				return &exitError{code: ExitUsage, err: err}
			}
			if km != nil {
				km.Watch(r)
				stop, err := serveMetrics(metricsListen, reg, log)
				if err != nil {
					return &exitError{code: ExitUnavailable, err: fmt.Errorf("--metrics-listen: %w", err)}
				}
				defer stop()
			}
			log.Info("ontime republish: starting", "brokers", strings.Join(fc.Brokers, ","), "group", fc.Group,
				"ladder", fc.Ladder.String(), "dead_letter_topic", fc.DeadLetterTopic,
				"session_timeout", cmp.Or(fc.SessionTimeout, kafkadelay.DefaultSessionTimeout))
			ctx := cmd.Context()
			if fc.StatsInterval > 0 {
				statsCtx, stop := context.WithCancel(ctx)
				defer stop()
				go logStats(statsCtx, r, fc.StatsInterval, log)
			}
			if err := r.Run(ctx); err != nil {
				return &exitError{code: ExitUnavailable, err: err}
			}
			log.Info("ontime republish: stopped")
			return nil
		},
	}
	k.add(cmd)
	f := cmd.Flags()
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFmt, "log-format", "text", "text or json")
	f.StringVar(&metricsListen, "metrics-listen", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464; default: off)")
	group.add(cmd)
	return cmd
}

// groupFlags override the configuration file's consumer group timing and
// read-ahead.
type groupFlags struct {
	session, heartbeat time.Duration
	strategy           string
	readAhead          int
}

func (g *groupFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationVar(&g.session, "session-timeout", 0, fmt.Sprintf("the group's session timeout: a crashed republisher's partitions wait this long before another takes them (default: consumer.session_timeout, else %v)", kafkadelay.DefaultSessionTimeout))
	f.DurationVar(&g.heartbeat, "heartbeat-interval", 0, fmt.Sprintf("how often to heartbeat to the group, less than the session timeout (default: consumer.heartbeat_interval, else %v)", kafkadelay.DefaultHeartbeatInterval))
	f.StringVar(&g.strategy, "rebalance-strategy", "", "the group's assignor: "+strings.Join(kafkadelay.RebalanceStrategies, ", ")+" (default: consumer.rebalance_strategy, else cooperative-sticky)")
	f.IntVar(&g.readAhead, "read-ahead", 0, "records read behind a waiting head, per partition (default: read_ahead, else 1000)")
}

// apply sets the flags given on the command line over fc.
func (g *groupFlags) apply(cmd *cobra.Command, fc *kafkaconfig.FileConfig) {
	f := cmd.Flags()
	if f.Changed("session-timeout") {
		fc.SessionTimeout = g.session
	}
	if f.Changed("heartbeat-interval") {
		fc.HeartbeatInterval = g.heartbeat
	}
	if f.Changed("rebalance-strategy") {
		fc.RebalanceStrategy = g.strategy
	}
	if f.Changed("read-ahead") {
		fc.ReadAhead = g.readAhead
	}
}

// logStats logs a line of totals every interval, and a line for each
// partition whose head is late.
func logStats(ctx context.Context, r *kafkadelay.Republisher, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var owned, held, buffered int
		var released, rerouted, dead, errs, early, ooo int64
		var worst kafkadelay.PartitionStats
		for _, s := range r.Stats() {
			if s.Owned {
				owned++
				held += s.Held
				buffered += s.Buffered
			}
			released += s.Released
			rerouted += s.Rerouted
			dead += s.DeadLettered
			errs += s.ProduceErrors
			early += s.ReleasedEarly
			ooo += s.OutOfOrder
			if s.HeadLate > worst.HeadLate {
				worst = s
			}
		}
		args := []any{"partitions", owned, "held", held, "buffered", buffered, "released", released,
			"rerouted", rerouted, "dead_lettered", dead, "produce_errors", errs, "released_early", early, "out_of_order", ooo}
		if worst.HeadLate > 0 {
			args = append(args, "latest_head", worst.Topic+"/"+strconv.Itoa(int(worst.Partition)), "head_late", worst.HeadLate.Round(time.Millisecond))
		}
		log.Info("ontime republish: stats", args...)
	}
}

func newKafkaScheduleCmd(e *env) *cobra.Command {
	var (
		k       kafkaConfigFlags
		in, at  string
		key     string
		headers []string
	)
	cmd := &cobra.Command{
		Use:   "kafka-schedule --config FILE TOPIC VALUE (--in DURATION | --at RFC3339)",
		Short: "Publish one delayed Kafka record to TOPIC through the bucket topics (VALUE - reads standard input)",
		Example: `  ontime kafka-schedule --config kafka.toml invoices '{"id":42}' --in 90s --key inv-42
  ontime kafka-schedule --config kafka.toml reminders "call Bob" --at 2026-12-01T09:00:00Z --header source=cli`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			topic, value := a[0], a[1]
			if (in == "") == (at == "") {
				return usageErr("give exactly one of --in and --at")
			}
			var due time.Time
			if in != "" {
				d, err := time.ParseDuration(in)
				if err != nil {
					return usageErr("--in %q: %v", in, err)
				}
				due = time.Now().Add(d)
			} else {
				t, err := time.Parse(time.RFC3339Nano, at)
				if err != nil {
					return usageErr("--at %q: want RFC 3339 with a zone, e.g. 2026-11-22T10:15:03Z", at)
				}
				due = t
			}
			if value == "-" {
				b, err := io.ReadAll(e.stdin)
				if err != nil {
					return err
				}
				value = string(b)
			}
			rec := &kgo.Record{Topic: topic, Value: []byte(value)}
			if key != "" {
				rec.Key = []byte(key)
			}
			for _, h := range headers {
				hk, hv, ok := strings.Cut(h, "=")
				if !ok || hk == "" {
					return usageErr("--header %q: want key=value", h)
				}
				rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: hk, Value: []byte(hv)})
			}
			fc, err := k.load()
			if err != nil {
				return err
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(fc.Brokers...), kgo.ClientID(fc.ClientID))
			if err != nil {
				return err
			}
			defer cl.Close()
			p, err := kafkadelay.NewProducer(cl, fc.Ladder)
			if err != nil {
				return err
			}
			routed, err := p.Route(rec, due)
			if err != nil {
				return &exitError{code: ExitInvalid, err: err}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			if routed.Topic != topic {
				warnMissingDestination(ctx, e.stderr, cl, fc, topic)
			}
			if err := cl.ProduceSync(ctx, routed).FirstErr(); err != nil {
				return &exitError{code: ExitUnavailable, err: fmt.Errorf("produce to %s: %w", routed.Topic, err)}
			}
			meta, _ := kafkadelay.ParseMeta(routed.Headers)
			fmt.Fprintf(e.stdout, "%s\tdue %s UTC (%s)\tvia %s\n", meta.ID, humanTime(meta.Due), relative(meta.Due), routed.Topic)
			return nil
		},
	}
	k.add(cmd)
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "delay from now, e.g. 90s, 1h30m")
	f.StringVar(&at, "at", "", "due instant, RFC 3339 with a zone")
	f.StringVar(&key, "key", "", "record key")
	f.StringArrayVar(&headers, "header", nil, "record header key=value (repeatable)")
	return cmd
}

// warnMissingDestination writes a warning when topic does not exist on the
// destination cluster: the republisher would dead-letter the record when it
// is due, unless the topic exists by then or it creates destinations. The
// lookup does not ask the cluster to create the topic; a lookup that fails
// warns of nothing (the produce that follows reports a cluster that is
// down).
func warnMissingDestination(ctx context.Context, w io.Writer, bucketCl *kgo.Client, fc *kafkaconfig.FileConfig, topic string) {
	cl, where := bucketCl, strings.Join(fc.Brokers, ",")
	if fc.DestinationBrokers != nil {
		var err error
		if cl, err = kgo.NewClient(kgo.SeedBrokers(fc.DestinationBrokers...), kgo.ClientID(fc.ClientID)); err != nil {
			return
		}
		defer cl.Close()
		where = strings.Join(fc.DestinationBrokers, ",")
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 {
		return
	}
	if code := resp.Topics[0].ErrorCode; code == kerr.UnknownTopicOrPartition.Code {
		then := "the republisher dead-letters the record when it is due unless the topic exists by then (create it, or set create_destinations = true)"
		if fc.CreateDestinations {
			then = "the republisher creates it when the record is due (create_destinations = true)"
		}
		fmt.Fprintf(w, "ontime: warning: topic %q does not exist on %s: %s\n", topic, where, then)
	}
}

func newDevKafkaCmd(e *env) *cobra.Command {
	var (
		k          kafkaConfigFlags
		port       int
		brokers    int
		partitions int
		topics     []string
	)
	cmd := &cobra.Command{
		Use:   "dev-kafka [--config FILE]",
		Short: "Run an in-memory Kafka-protocol cluster on loopback for trying the republisher (franz-go's kfake; not for production)",
		Long: `dev-kafka starts franz-go's in-process Kafka-protocol cluster (kfake) on 127.0.0.1,
creates the bucket and dead-letter topics of --config (and --topic ones), creates
any other topic when a client first asks for it (every client: the republisher,
kcat, a consumer), and runs until interrupted. Data is kept in memory only.`,
		Example: `  ontime dev-kafka --config kafka.toml --topic invoices`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			seed := slices.Clone(topics)
			if k.file != "" {
				fc, err := k.load()
				if err != nil {
					return err
				}
				seed = append(seed, fc.Ladder.Topics()...)
				seed = append(seed, fc.DeadLetterTopic)
			}
			ports := make([]int, brokers)
			for i := range ports {
				ports[i] = port + i
			}
			opts := []kfake.Opt{kfake.Ports(ports...), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(partitions)}
			if len(seed) > 0 {
				sort.Strings(seed)
				opts = append(opts, kfake.SeedTopics(int32(partitions), slices.Compact(seed)...))
			}
			c, err := kfake.NewCluster(opts...)
			if err != nil {
				return &exitError{code: ExitUnavailable, err: fmt.Errorf("starting the cluster: %w", err)}
			}
			defer c.Close()
			createOnFirstUse(c)
			fmt.Fprintf(e.stdout, "kafka (kfake, in memory) listening on %s\n", strings.Join(c.ListenAddrs(), ","))
			if len(seed) > 0 {
				fmt.Fprintf(e.stdout, "topics (%d partitions each): %s\n", partitions, strings.Join(slices.Compact(seed), " "))
			}
			<-cmd.Context().Done()
			return nil
		},
	}
	k.add(cmd)
	f := cmd.Flags()
	f.IntVar(&port, "port", 9092, "port of the first broker (the others follow)")
	f.IntVar(&brokers, "brokers", 1, "number of brokers")
	f.IntVar(&partitions, "partitions", 3, "partitions per topic")
	f.StringArrayVar(&topics, "topic", nil, "a topic to create (repeatable); others are created when a client first asks for them")
	return cmd
}

// createOnFirstUse makes the cluster create any topic a client asks for by
// name, whether or not the client allows auto-creation: franz-go clients
// (the republisher's, kafka-schedule's) do not ask for it, and
// kfake.AllowAutoTopicCreation only honours the clients that do, as a
// broker with auto.create.topics.enable would. A metadata request for all
// topics creates nothing.
func createOnFirstUse(c *kfake.Cluster) {
	c.ControlKey(kmsg.Metadata.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if m, ok := req.(*kmsg.MetadataRequest); ok && len(m.Topics) > 0 {
			m.AllowAutoTopicCreation = true
		}
		return nil, nil, false // not handled: kfake answers the (amended) request
	})
}
