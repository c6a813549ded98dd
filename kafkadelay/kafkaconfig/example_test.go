package kafkaconfig_test

import (
	"fmt"

	"github.com/ontime-go/ontime/kafkadelay/kafkaconfig"
)

// A settings file in the reference layout, with ontime's keys beside it,
// read into the republisher's configuration; a typo is an error naming
// the key.
func ExampleParse() {
	fc, err := kafkaconfig.Parse([]byte(`
[default.integration.messaging.republisher]
enabled = true
delay_strategy_backend = "kafka_topic_delay_strategy"
create_destinations = true

[default.integration.messaging.republisher.consumer]
bootstrap_servers = ["kafka-1:9092", "kafka-2:9092"]
group_id = "ontime-republisher"

[default.integration.messaging.republisher.delay_topics]
60 = "platform.internal.delay-1m.v1"
300 = "platform.internal.delay-5m.v1"
`), "")
	if err != nil {
		panic(err)
	}
	cfg, opts := fc.Config(nil, nil) // for kafkadelay.NewRepublisher(cfg, opts...)
	fmt.Println(fc.Section)
	fmt.Println(cfg.Ladder, cfg.Group, cfg.DeadLetterTopic, cfg.CreateDestinations, len(opts))

	_, err = kafkaconfig.Parse([]byte("[consumer]\nbootstrap_servers = \"k:9092\"\ngroup_id = \"g\"\ngroupid = \"typo\"\n[delay_topics]\n1 = \"d\"\n"), "")
	fmt.Println(err)
	// Output:
	// default.integration.messaging.republisher
	// 1m=platform.internal.delay-1m.v1, 5m=platform.internal.delay-5m.v1 ontime-republisher ontime.delay.dead-letters true 2
	// kafkadelay: invalid: consumer.groupid: unknown key
}
