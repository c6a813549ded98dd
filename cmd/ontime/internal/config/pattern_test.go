package config

import (
	"errors"
	"testing"

	"github.com/ontime-go/ontime/ontimedriver"
)

// serve_topics entries are checked by the library's rules: a topic, or a
// pattern with * and ? (ontimedriver.ValidatePattern).
func TestCheckTopicPattern(t *testing.T) {
	for _, ok := range []string{"*", "billing.*", "tenant-?", "a*b?c", "exact", "t/x:y@z+w~v"} {
		if err := checkTopicPattern(ok); err != nil {
			t.Errorf("%q: %v, want it accepted", ok, err)
		}
	}
	for _, bad := range []string{"", "a b*", "..", "{x}*", "caf\u00e9?", string(make([]byte, 201))} {
		if err := checkTopicPattern(bad); !errors.Is(err, ontimedriver.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", bad, err)
		}
	}
}
