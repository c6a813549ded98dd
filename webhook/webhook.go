// Package webhook signs and verifies the webhooks `ontime serve` sends, by
// the Standard Webhooks specification (https://www.standardwebhooks.com),
// and decodes their body.
//
// Each request carries three headers:
//
//	webhook-id:        msg_<22 characters>, the same on every attempt of a timer (MessageID)
//	webhook-timestamp: the unix time of this attempt, in seconds
//	webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body"> (one per secret, space-separated)
//
// A secret is "whsec_" followed by the base64 of 24 to 64 random bytes; the
// bytes are the HMAC key. During a rotation the server holds several
// secrets and signs with each, so a receiver that knows any one of them
// accepts the request.
//
// A receiver verifies a request before it trusts any of it:
//
//	v, err := webhook.NewVerifier(os.Getenv("ONTIME_WEBHOOK_SECRET"))
//	...
//	body, _ := io.ReadAll(r.Body)
//	if err := v.Verify(r.Header, body); err != nil {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
//	var ev webhook.Event
//	err = json.Unmarshal(body, &ev) // ev.Data.Topic, ev.Data.Attempt, ...
//
// Verify refuses a timestamp more than Tolerance (5 minutes) away from the
// receiver's clock, so that a captured request cannot be replayed later; a
// receiver that also remembers the webhook-id values it saw within that
// window refuses replays within it too.
//
// The package uses the standard library only, so that a receiver importing
// it pulls nothing else in; any implementation of the specification
// verifies the same requests.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a Standard Webhooks request.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every secret.
const SecretPrefix = "whsec_"

// Key sizes the specification allows: 24 to 64 bytes (192 to 512 bits).
const (
	MinKeyBytes = 24
	MaxKeyBytes = 64
)

// DefaultTolerance is how far a request's timestamp may be from the
// receiver's clock, either way.
const DefaultTolerance = 5 * time.Minute

// Errors Verify returns (wrapped). Callers compare with errors.Is.
var (
	// ErrMissingHeader: the request lacks webhook-id, webhook-timestamp or
	// webhook-signature.
	ErrMissingHeader = errors.New("webhook: missing header")
	// ErrTimestamp: webhook-timestamp is not an integer, or is further
	// than the tolerance from the receiver's clock (a replay, or a clock
	// that is off).
	ErrTimestamp = errors.New("webhook: timestamp outside the tolerance")
	// ErrSignature: no v1 signature of the header matches any key.
	ErrSignature = errors.New("webhook: no matching signature")
	// ErrSecret: a secret is not "whsec_" and the base64 of 24 to 64
	// bytes.
	ErrSecret = errors.New("webhook: invalid secret")
)

// Key is the HMAC key of one secret. The zero Key signs nothing.
type Key struct {
	b []byte
}

// ParseSecret decodes a "whsec_<base64>" secret. The error never quotes
// the secret.
func ParseSecret(s string) (Key, error) {
	enc, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Key{}, fmt.Errorf("%w: it does not start with %q", ErrSecret, SecretPrefix)
	}
	// Padded or not: base64 tools differ.
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(enc)
	}
	if err != nil {
		return Key{}, fmt.Errorf("%w: what follows %q is not base64", ErrSecret, SecretPrefix)
	}
	if len(b) < MinKeyBytes || len(b) > MaxKeyBytes {
		return Key{}, fmt.Errorf("%w: it holds %d bytes; the specification wants %d to %d random bytes", ErrSecret, len(b), MinKeyBytes, MaxKeyBytes)
	}
	return Key{b: b}, nil
}

// ParseSecrets decodes one or more secrets separated by spaces or commas,
// as a configuration or an environment variable holds them during a
// rotation ("whsec_new whsec_old"). The error names the position of a bad
// secret, never its text.
func ParseSecrets(s string) ([]Key, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	if len(fields) == 0 {
		return nil, fmt.Errorf("%w: no secret", ErrSecret)
	}
	keys := make([]Key, len(fields))
	for i, f := range fields {
		k, err := ParseSecret(f)
		if err != nil {
			return nil, fmt.Errorf("secret %d of %d: %w", i+1, len(fields), err)
		}
		keys[i] = k
	}
	return keys, nil
}

// Bytes returns a copy of the key's bytes.
func (k Key) Bytes() []byte { return append([]byte(nil), k.b...) }

// Sign returns "v1," and the base64 HMAC-SHA256 of "id.timestamp.body"
// keyed with k, timestamp in unix seconds.
func (k Key) Sign(id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(k.mac(id, strconv.FormatInt(timestamp, 10), body))
}

func (k Key) mac(id, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, k.b)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Sign returns the webhook-signature value of a request: one v1 signature
// per key, in order, separated by spaces.
func Sign(keys []Key, id string, timestamp time.Time, body []byte) string {
	ts := timestamp.Unix()
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = k.Sign(id, ts, body)
	}
	return strings.Join(sigs, " ")
}

// SetHeaders sets the three headers of a request signed with keys at
// timestamp.
func SetHeaders(h http.Header, keys []Key, id string, timestamp time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(timestamp.Unix(), 10))
	h.Set(HeaderSignature, Sign(keys, id, timestamp, body))
}

// MessageID is the webhook-id `ontime serve` sends for a timer: "msg_" and
// the first 16 bytes of SHA-256(topic, a zero byte, id) in unpadded
// base64url. It is the same on every attempt of the timer, as the
// specification asks, contains no '.', and binds the topic and the id to
// the signature, so a receiver of bodies sent raw can check the
// Ontime-Topic and Ontime-Id headers against it.
func MessageID(topic, id string) string {
	h := sha256.New()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return "msg_" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// Verifier checks requests against a set of keys.
type Verifier struct {
	// Keys are the accepted keys; a request signed with any one passes.
	Keys []Key
	// Tolerance is how far the request's timestamp may be from Now.
	// Default (0): DefaultTolerance.
	Tolerance time.Duration
	// Now is the receiver's clock. Default (nil): time.Now.
	Now func() time.Time
}

// NewVerifier returns a Verifier of the given secrets, each one or more
// "whsec_" secrets separated by spaces or commas (see ParseSecrets).
func NewVerifier(secrets ...string) (*Verifier, error) {
	v := &Verifier{}
	for _, s := range secrets {
		keys, err := ParseSecrets(s)
		if err != nil {
			return nil, err
		}
		v.Keys = append(v.Keys, keys...)
	}
	if len(v.Keys) == 0 {
		return nil, fmt.Errorf("%w: no secret", ErrSecret)
	}
	return v, nil
}

// Verify checks the headers and the raw body of a request: all three
// headers present, a timestamp within the tolerance, and a v1 signature
// that one of the keys made. It compares signatures in constant time.
// Other signature versions in the header (v1a, ...) are skipped.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: want %s, %s and %s", ErrMissingHeader, HeaderID, HeaderTimestamp, HeaderSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not unix seconds", ErrTimestamp, HeaderTimestamp)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tol := v.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	if d := now().Sub(time.Unix(sec, 0)); d > tol || d < -tol {
		return fmt.Errorf("%w: the request was signed %s ago (tolerance %s)", ErrTimestamp, d.Round(time.Second), tol)
	}
	var want [][]byte
	for _, f := range strings.Fields(sigs) {
		version, enc, ok := strings.Cut(f, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(got) != sha256.Size {
			continue
		}
		if want == nil {
			want = make([][]byte, len(v.Keys))
			for i, k := range v.Keys {
				want[i] = k.mac(id, ts, body)
			}
		}
		for _, w := range want {
			if hmac.Equal(got, w) {
				return nil
			}
		}
	}
	return ErrSignature
}
