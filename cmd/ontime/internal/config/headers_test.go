package config_test

import (
	"strings"
	"testing"

	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
)

const goodSecret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// TestWebhookConfig: an http target's secrets, payload, legacy switch and
// header allow-list are checked when the configuration loads; each refusal
// names the key (never a secret's text) and says why.
func TestWebhookConfig(t *testing.T) {
	t.Setenv("ONTIME_TEST_HOOK_SECRETS", goodSecret+", "+goodSecret)
	t.Setenv("ONTIME_TEST_HOOK_BAD", "s3cret-of-ontime-0.1")
	for _, c := range []struct {
		name string
		tg   config.Target
		want []string // empty: valid
	}{
		{"no secret", config.Target{}, nil},
		{"rotation", config.Target{Secret: goodSecret + " " + goodSecret, Payload: "raw", LegacySignature: true}, nil},
		{"secrets from the environment", config.Target{SecretEnv: "ONTIME_TEST_HOOK_SECRETS"}, nil},
		{"allow-list", config.Target{ForwardHeaders: []string{"traceparent", "X-Request-Id"}}, nil},
		{"a secret of the earlier signature", config.Target{Secret: "s3cret-of-ontime-0.1"}, []string{"target.secret:", `start with "whsec_"`, "base64 of S"}},
		{"from the environment", config.Target{SecretEnv: "ONTIME_TEST_HOOK_BAD"}, []string{"target.secret_env (ONTIME_TEST_HOOK_BAD)", "whsec_"}},
		{"unset variable", config.Target{SecretEnv: "ONTIME_TEST_HOOK_UNSET"}, []string{"ONTIME_TEST_HOOK_UNSET is not set"}},
		{"short key", config.Target{Secret: "whsec_c2hvcnQ="}, []string{"holds 5 bytes", "24 to 64"}},
		{"both", config.Target{Secret: goodSecret, SecretEnv: "ONTIME_TEST_HOOK_SECRETS"}, []string{"both set"}},
		{"payload", config.Target{Payload: "json"}, []string{`target.payload "json"`}},
		{"legacy without a secret", config.Target{LegacySignature: true}, []string{"legacy_signature needs a secret"}},
		{"Authorization", config.Target{ForwardHeaders: []string{"authorization"}}, []string{`"authorization" is refused`, "credential"}},
		{"Cookie", config.Target{ForwardHeaders: []string{"Cookie"}}, []string{`"Cookie" is refused`}},
		{"Proxy-*", config.Target{ForwardHeaders: []string{"Proxy-Authorization"}}, []string{`"Proxy-Authorization" is refused`}},
		{"Forwarded", config.Target{ForwardHeaders: []string{"Forwarded"}}, []string{`"Forwarded" is refused`}},
		{"X-Forwarded-*", config.Target{ForwardHeaders: []string{"X-Forwarded-For", "x-forwarded-host"}}, []string{`"X-Forwarded-For" is refused`, `"x-forwarded-host" is refused`}},
		{"framing", config.Target{ForwardHeaders: []string{"Content-Length", "Host"}}, []string{`"Content-Length" is refused: set by the target`}},
		{"the target's own", config.Target{ForwardHeaders: []string{"Ontime-Id", "webhook-signature"}}, []string{`"Ontime-Id" is refused: the target's own`, `"webhook-signature" is refused`}},
		{"not a name", config.Target{ForwardHeaders: []string{"bad name"}}, []string{"not an HTTP field name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := c.tg
			tg.Type, tg.URL = config.TargetHTTP, "http://127.0.0.1:9/hook"
			cfg := &config.Config{Topics: map[string]config.Topic{"hooks": {Target: &tg}}}
			cfg.Fill()
			err := cfg.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want an error naming %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "AAECAwQF") {
				t.Errorf("the error quotes a secret: %v", err)
			}
		})
	}
}
