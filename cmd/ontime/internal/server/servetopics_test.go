package server_test

import (
	"slices"
	"testing"

	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
)

// TestServeTopics: a server delivers only the configured topics and those
// serve_topics matches. A timer scheduled through the API on another topic
// is stored but starts no worker (its timers stay for their own
// consumers), and watching that topic is refused.
func TestServeTopics(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{
		ServeTopics: []string{"billing.*", "exact"},
		Topics:      map[string]config.Topic{"orders": {}},
	}
	e := newEnv(t, envOpts{cfg: cfg})
	for _, topic := range []string{"billing.eu", "exact", "orders", "python.jobs", "exactly", "xbilling.eu"} {
		e.want(e.do("POST", "/v1/topics/"+topic+"/timers", map[string]any{"delay": "1h"}), 201, "")
	}
	got := e.disp.Topics()
	slices.Sort(got)
	if want := []string{"billing.eu", "exact", "orders"}; !slices.Equal(got, want) {
		t.Errorf("workers for %v, want %v", got, want)
	}
	r := e.do("GET", "/v1/topics/python.jobs/watch", nil)
	e.want(r, 403, "topic_not_served")
	// The refused topics' timers are still stored, untouched.
	for _, topic := range []string{"python.jobs", "exactly", "xbilling.eu"} {
		if n, err := e.client.Count(t.Context(), topic); err != nil || n.Scheduled != 1 {
			t.Errorf("%s: %+v, %v; want its timer kept", topic, n, err)
		}
	}
}

// serve_topics patterns match as the library's HandleTopics patterns do
// (ontimedriver.MatchTopic): * any run of characters, ? any one.
func TestServeTopicsMatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, topic string
		want           bool
	}{
		{"*", "anything/at:all", true},
		{"billing.*", "billing.eu", true},
		{"billing.*", "billing.", true},
		{"billing.*", "billing", false},
		{"*.jobs", "a.b.jobs", true},
		{"*.jobs", "a.jobs.x", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "acb", false},
		{"a*b*b", "abb", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"t/*", "t/x/y", true},
		{"tenant-?", "tenant-1", true},
		{"tenant-?", "tenant-12", false},
		{"tenant-?", "tenant-", false},
	} {
		cfg := &config.Config{ServeTopics: []string{c.pattern}}
		if got := cfg.Serves(c.topic); got != c.want {
			t.Errorf("serve_topics [%q] serves %q: %v, want %v", c.pattern, c.topic, got, c.want)
		}
	}
}
