package kafkaconfig_test

import (
	"errors"
	"testing"

	"github.com/ontime-go/ontime/kafkadelay"
	"github.com/ontime-go/ontime/kafkadelay/kafkaconfig"
)

// Parse never panics, and every error wraps ErrInvalid.
func FuzzParseConfig(f *testing.F) {
	f.Add(referenceSettings, "")
	f.Add("[consumer]\nbootstrap_servers = \"a:1\"\ngroup_id = \"g\"\n[delay_topics]\n\"0.5\" = \"x\"\n", "")
	f.Add("[a.delay_topics]\n1 = \"x\"\n", "a")
	f.Fuzz(func(t *testing.T, data, section string) {
		fc, err := kafkaconfig.Parse([]byte(data), section)
		if err != nil {
			if !errors.Is(err, kafkadelay.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if fc.Ladder == nil || len(fc.Brokers) == 0 || fc.Group == "" || fc.DeadLetterTopic == "" {
			t.Fatalf("accepted an incomplete configuration: %+v", fc)
		}
	})
}
