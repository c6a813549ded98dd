package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
)

// writeFile writes text to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadFor parses serve's flags and loads the configuration as serve would.
func loadFor(t *testing.T, vars map[string]string, args ...string) (*config.Config, error) {
	t.Helper()
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	cmd := newServeCmd(&env{lookup: lookup})
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	path, _ := cmd.Flags().GetString("config")
	return loadServeConfig(cmd.Flags(), path, lookup)
}

// TestServeConfigPrecedence: flags > ONTIME_* > the TOML file > defaults.
func TestServeConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ontime.toml")
	err := os.WriteFile(file, []byte(`
listen = "127.0.0.1:1111"
data_dir = "/from/file"
log_level = "warn"
max_body_bytes = 2048
discover_interval = "3s"
tokens = ["file-token"]
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}

	c, err := loadFor(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.DataDir != "./ontime-data" || c.Redis != "" || c.MaxBodyBytes != 1<<20 ||
		c.LogLevel != "info" || c.DiscoverInterval.D() != time.Second || len(c.Tokens) != 0 {
		t.Errorf("defaults: %+v", c)
	}

	c, err = loadFor(t, nil, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:1111" || c.DataDir != "/from/file" || c.LogLevel != "warn" || c.MaxBodyBytes != 2048 ||
		c.DiscoverInterval.D() != 3*time.Second || strings.Join(c.Tokens, ",") != "file-token" {
		t.Errorf("file: %+v", c)
	}

	env := map[string]string{
		"ONTIME_CONFIG": file, "ONTIME_LISTEN": "127.0.0.1:2222", "ONTIME_LOG_LEVEL": "debug",
		"ONTIME_TOKENS": "a, b", "ONTIME_MAX_BODY_BYTES": "4096",
	}
	c, err = loadFor(t, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:2222" || c.DataDir != "/from/file" || c.LogLevel != "debug" || c.MaxBodyBytes != 4096 ||
		strings.Join(c.Tokens, ",") != "a,b" {
		t.Errorf("env over file: %+v", c)
	}

	c, err = loadFor(t, env, "--listen", "127.0.0.1:3333", "--data-dir", "/from/flag", "--tokens", "flag-token")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:3333" || c.DataDir != "/from/flag" || c.LogLevel != "debug" || strings.Join(c.Tokens, ",") != "flag-token" {
		t.Errorf("flags over env: %+v", c)
	}
}

// TestServeTokenRoles: each role's tokens come from the file, ONTIME_* and
// flags like any key; the old tokens key stays (its tokens are admin);
// allowed_hosts too.
func TestServeTokenRoles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ontime.toml")
	err := os.WriteFile(file, []byte(`
tokens = ["legacy"]
read_tokens = ["scraper", "grafana"]
write_tokens = ["publisher"]
admin_tokens = ["ops"]
allowed_hosts = ["ontime.example.com", "*.corp.test"]
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	c, err := loadFor(t, map[string]string{"ONTIME_WRITE_TOKENS": "w1,w2"}, "--config", file, "--admin-tokens", "root", "--allowed-hosts", "a.test, b.test")
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(c.Tokens, c.ReadTokens, c.WriteTokens, c.AdminTokens, c.AllowedHosts)
	if want := "[legacy] [scraper grafana] [w1 w2] [root] [a.test b.test]"; got != want {
		t.Errorf("tokens and hosts: %s, want %s", got, want)
	}
	roles := map[string]string{}
	for _, tok := range roleTokens(c) {
		roles[tok.Secret] = tok.Role.String()
	}
	if got := fmt.Sprint(roles); got != "map[grafana:read root:admin scraper:read w1:write w2:write]" {
		t.Errorf("roles: %s", got)
	}
	if !c.AuthOn() {
		t.Error("auth off with tokens")
	}
}

// TestServeBlankTokens: a blank token from any source refuses to start,
// with a message naming the source, instead of turning auth off (or
// leaving a blank token that nothing can send): ONTIME_TOKENS="", ",",
// " , ", a blank entry, flags, and the file's lists.
func TestServeBlankTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"empty env", map[string]string{"ONTIME_TOKENS": ""}, nil, "ONTIME_TOKENS: holds no token"},
		{"comma env", map[string]string{"ONTIME_TOKENS": ","}, nil, "ONTIME_TOKENS: token 1 of 2 is blank"},
		{"spaces env", map[string]string{"ONTIME_TOKENS": " , "}, nil, "ONTIME_TOKENS: token 1 of 2 is blank"},
		{"space env", map[string]string{"ONTIME_TOKENS": "  "}, nil, "ONTIME_TOKENS: holds no token"},
		{"blank entry env", map[string]string{"ONTIME_TOKENS": "a,,b"}, nil, "ONTIME_TOKENS: token 2 of 3 is blank"},
		{"trailing comma env", map[string]string{"ONTIME_ADMIN_TOKENS": "a,"}, nil, "ONTIME_ADMIN_TOKENS: token 2 of 2 is blank"},
		{"empty read env", map[string]string{"ONTIME_READ_TOKENS": ""}, nil, "ONTIME_READ_TOKENS: holds no token"},
		{"empty write env", map[string]string{"ONTIME_WRITE_TOKENS": " , "}, nil, "ONTIME_WRITE_TOKENS: token 1 of 2 is blank"},
		{"empty flag", nil, []string{"--tokens", ""}, "--tokens: holds no token"},
		{"comma flag", nil, []string{"--admin-tokens", ","}, "--admin-tokens: token 1 of 2 is blank"},
		{"blank read flag", nil, []string{"--read-tokens", "x, "}, "--read-tokens: token 2 of 2 is blank"},
		{"file blank", nil, []string{"--config", write("a.toml", `tokens = [""]`)}, "a.toml: tokens: token 1 of 1 is blank"},
		{"file spaces", nil, []string{"--config", write("b.toml", `read_tokens = ["ok", "  "]`)}, "b.toml: read_tokens: token 2 of 2 is blank"},
		{"file empty list", nil, []string{"--config", write("c.toml", `admin_tokens = []`)}, "c.toml: admin_tokens: holds no token"},
		{"file write blank", nil, []string{"--config", write("d.toml", `write_tokens = [" "]`)}, "d.toml: write_tokens: token 1 of 1 is blank"},
		{"a token with a space", map[string]string{"ONTIME_TOKENS": "a b"}, nil, "tokens[0] has a space"},
		{"one token, two roles", map[string]string{"ONTIME_READ_TOKENS": "same", "ONTIME_ADMIN_TOKENS": "same"}, nil, "is also in"},
		{"bad allowed host", nil, []string{"--allowed-hosts", "http://x"}, `allowed_hosts[0] "http://x"`},
		{"allowed host with a port", nil, []string{"--allowed-hosts", "x.test:8080"}, `allowed_hosts[0] "x.test:8080"`},
	} {
		_, err := loadFor(t, c.env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestServeTopicsConfig: serve_topics defaults to every topic on the native
// layout and to none (the configured topics only) on the compat layout;
// the file, ONTIME_SERVE_TOPICS and --serve-topics set it, an empty value
// included.
func TestServeTopicsConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ontime.toml")
	if err := os.WriteFile(file, []byte("redis = \"redis://x\"\nredis_layout = \"compat\"\nserve_topics = [\"py.*\", \"one\"]\n[topics.mine]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"native default", nil, nil, "[*]"},
		{"compat default", nil, []string{"--redis", "redis://x", "--redis-layout", "compat"}, "[]"},
		{"file", nil, []string{"--config", file}, "[py.* one]"},
		{"env over file", map[string]string{"ONTIME_SERVE_TOPICS": "a, b*"}, []string{"--config", file}, "[a b*]"},
		{"empty flag", nil, []string{"--serve-topics", ""}, "[]"},
	} {
		cfg, err := loadFor(t, c.env, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := fmt.Sprint(cfg.ServeTopics); got != c.want {
			t.Errorf("%s: serve_topics %s, want %s", c.name, got, c.want)
		}
	}
	cfg, err := loadFor(t, nil, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]bool{"mine": true, "one": true, "py.x": true, "py": false, "other": false} {
		if cfg.Serves(topic) != want {
			t.Errorf("Serves(%q) = %v, want %v", topic, !want, want)
		}
	}
}

func TestServeConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown key", nil, []string{"--config", write("a.toml", `lissen = "x"`)}, "unknown keys: lissen"},
		{"bad toml", nil, []string{"--config", write("b.toml", `listen = `)}, "config"},
		{"missing file", nil, []string{"--config", filepath.Join(dir, "nope.toml")}, "nope.toml"},
		{"bad env number", map[string]string{"ONTIME_MAX_BODY_BYTES": "lots"}, nil, "ONTIME_MAX_BODY_BYTES"},
		{"bad layout", nil, []string{"--redis-layout", "weird"}, "redis_layout"},
		{"bad redis url", nil, []string{"--redis", "http://x"}, "redis"},
		{"compat with a prefix", nil, []string{"--redis", "redis://x", "--redis-layout", "compat", "--redis-prefix", "p:"}, "redis_prefix"},
		{"bad log level", map[string]string{"ONTIME_LOG_LEVEL": "loud"}, nil, "log_level"},
		{"bad target", nil, []string{"--config", write("c.toml", "[topics.t.target]\ntype = \"carrier-pigeon\"\n")}, "carrier-pigeon"},
		{"http target without url", nil, []string{"--config", write("d.toml", "[topics.t.target]\ntype = \"http\"\n")}, "target.url"},
		{"stream without redis", nil, []string{"--config", write("e.toml", "[topics.t.target]\ntype = \"redis-stream\"\n")}, "target.redis"},
		{"kafka without brokers", nil, []string{"--config", write("l.toml", "[topics.t.target]\ntype = \"kafka\"\n")}, "target.brokers: a kafka target needs its brokers"},
		{"kafka bad broker", nil, []string{"--config", write("m.toml", "[topics.t.target]\ntype = \"kafka\"\nbrokers = [\"nohost\"]\n")}, `target.brokers: "nohost": want host:port`},
		{"kafka bad key", nil, []string{"--config", write("n.toml", "[topics.t.target]\ntype = \"kafka\"\nbrokers = [\"k:9092\"]\nkey = \"body\"\n")}, `target.key "body"`},
		{"kafka bad topic", nil, []string{"--config", write("o.toml", "[topics.t.target]\ntype = \"kafka\"\nbrokers = [\"k:9092\"]\nkafka_topic = \"a b\"\n")}, "target.kafka_topic"},
		{"max_inflight_bytes below the largest request", nil, []string{"--max-inflight-bytes", "1000000"}, "max_inflight_bytes 1000000 is below the largest request"},
		{"negative read_timeout", map[string]string{"ONTIME_READ_TIMEOUT": "-1s"}, nil, "read_timeout is negative"},
		{"bad serve_topics pattern", nil, []string{"--serve-topics", "ok.*,a b*"}, `serve_topics[1] "a b*"`},
		{"dot topic in serve_topics", nil, []string{"--serve-topics", ".."}, `serve_topics[0] ".."`},
		{"bad topic name", nil, []string{"--config", write("f.toml", "[topics.\"a b\"]\nconcurrency = 1\n")}, "topics.a b"},
		{"retry max_attempts below -1", nil, []string{"--config", write("h.toml", "[topics.t]\nretry = { max_attempts = -2 }\n")}, "retry.max_attempts -2"},
		{"retry max_attempts 0 in a topic", nil, []string{"--config", write("j.toml", "[topics.t]\nretry = { max_attempts = 0 }\n")}, `"topics.t.retry.max_attempts"): 0: a timer needs at least 1 delivery`},
		{"retry max_attempts 0 in defaults", nil, []string{"--config", write("k.toml", "[defaults.retry]\nmax_attempts = 0\n")}, `"defaults.retry.max_attempts"): 0:`},
		{"retry min above max", nil, []string{"--config", write("i.toml", "[topics.t]\nretry = { min_delay = \"2s\", max_delay = \"1s\" }\n")}, "retry.min_delay"},
		{"missing secret env", nil, []string{"--config", write("g.toml", "[topics.t.target]\ntype = \"http\"\nurl = \"http://x\"\nsecret_env = \"ONTIME_TEST_NO_SUCH_VAR\"\n")}, "secret_env"},
	} {
		_, err := loadFor(t, c.env, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestMetricsConfiguredTopics: the topics the configuration names have
// their own metrics label from the start and keep it after more junk
// topics than metrics_max_topics were published first.
func TestMetricsConfiguredTopics(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ontime.toml")
	if err := os.WriteFile(file, []byte("metrics_max_topics = 3\nserve_topics = [\"audit\", \"jobs.*\"]\n[topics.billing]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadFor(t, nil, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	reg, m, err := newMetrics(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		topic := fmt.Sprintf("junk-%d", i)
		m.AfterPublish(t.Context(), &ontime.PublishEvent{Topic: topic, Timers: []ontime.Timer{{ID: "x"}}, Results: []ontime.PublishResult{{ID: "x"}}})
	}
	for _, topic := range []string{"billing", "audit"} {
		m.AfterPublish(t.Context(), &ontime.PublishEvent{Topic: topic, Timers: []ontime.Timer{{ID: "x"}}, Results: []ontime.PublishResult{{ID: "x"}}})
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "ontime_published_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "topic" {
					got[l.GetValue()] = mt.GetCounter().GetValue()
				}
			}
		}
	}
	if got["billing"] != 1 || got["audit"] != 1 || got["(other)"] != 97 || len(got) != 6 {
		t.Errorf("published by label: %v; want billing 1, audit 1, three junk topics 1 each, (other) 97", got)
	}
}
