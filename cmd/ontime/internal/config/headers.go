package config

import (
	"errors"
	"fmt"
	"net/textproto"
	"os"
	"strings"

	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/webhook"
)

// Payloads of an http target (Target.Payload).
const (
	// PayloadEnvelope sends a JSON envelope ({"type", "timestamp", "data"},
	// see package webhook) that holds the timer: its topic, id and
	// attempt are signed with the body. The default.
	PayloadEnvelope = "envelope"
	// PayloadRaw sends the timer's body as it was published.
	PayloadRaw = "raw"
)

// ForwardRefusal says why a timer header may never reach a webhook as an
// HTTP header, even when target.forward_headers lists it, or returns ""
// when it may. Credentials and proxy headers (Authorization, Cookie,
// Proxy-*, Forwarded, X-Forwarded-*) would let whoever publishes a timer
// speak for ontime to the receiver or to the proxies before it; framing
// and hop-by-hop headers belong to the transport; Ontime-*, webhook-*,
// Content-Type and User-Agent are the target's own.
func ForwardRefusal(name string) string {
	if !wire.ValidHeaderName(name) {
		return "not an HTTP field name"
	}
	c := textproto.CanonicalMIMEHeaderKey(name)
	switch {
	case c == "Authorization" || c == "Cookie" || c == "Set-Cookie" || c == "Forwarded" ||
		strings.HasPrefix(c, "Proxy-") || strings.HasPrefix(c, "X-Forwarded-") || c == "X-Real-Ip":
		return "a credential or proxy header, never taken from a timer (a receiver that needs one gets it from target.headers)"
	case transportHeaders[c]:
		return "set by the target or its transport"
	case strings.HasPrefix(c, "Ontime-") || strings.HasPrefix(c, "Webhook-") || c == "Content-Type" || c == "User-Agent":
		return "the target's own header"
	}
	return ""
}

// transportHeaders are framing and hop-by-hop headers.
var transportHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Expect": true,
}

// WebhookKeys returns the signing keys of an http target: none without a
// secret. The error names the key of the configuration, never the secret.
func (t *Target) WebhookKeys() ([]webhook.Key, error) {
	v, where := t.Secret, "target.secret"
	if t.SecretEnv != "" {
		var ok bool
		v, ok = os.LookupEnv(t.SecretEnv)
		where = "target.secret_env (" + t.SecretEnv + ")"
		if !ok {
			return nil, fmt.Errorf("target.secret_env: %s is not set", t.SecretEnv)
		}
	}
	if v == "" && t.SecretEnv == "" {
		return nil, nil
	}
	keys, err := webhook.ParseSecrets(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (generate one with: echo whsec_$(head -c 32 /dev/urandom | base64); a secret S of the earlier signature keeps its key as whsec_ and the base64 of S)", where, err)
	}
	return keys, nil
}

// checkWebhook checks the webhook keys of an http target.
func checkWebhook(t *Target) error {
	var errs []error
	if t.Secret != "" && t.SecretEnv != "" {
		errs = append(errs, errors.New("target.secret and target.secret_env are both set; keep one"))
	}
	keys, err := t.WebhookKeys()
	if err != nil {
		errs = append(errs, err)
	}
	switch t.Payload {
	case "", PayloadEnvelope, PayloadRaw:
	default:
		errs = append(errs, fmt.Errorf("target.payload %q: want %s or %s", t.Payload, PayloadEnvelope, PayloadRaw))
	}
	if t.LegacySignature && err == nil && len(keys) == 0 {
		errs = append(errs, errors.New("target.legacy_signature needs a secret to sign with"))
	}
	for _, h := range t.ForwardHeaders {
		if why := ForwardRefusal(h); why != "" {
			errs = append(errs, fmt.Errorf("target.forward_headers: %q is refused: %s", h, why))
		}
	}
	return errors.Join(errs...)
}
