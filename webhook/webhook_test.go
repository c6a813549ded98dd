package webhook_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/webhook"
)

// The test vector of the reference libraries of the specification
// (github.com/standard-webhooks/standard-webhooks, libraries/go): another
// implementation's signature of the same input.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vectorHeader() http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, vectorID)
	h.Set(webhook.HeaderTimestamp, strconv.Itoa(vectorTS))
	h.Set(webhook.HeaderSignature, vectorSig)
	return h
}

func at(sec int64) func() time.Time { return func() time.Time { return time.Unix(sec, 0) } }

func TestSignVector(t *testing.T) {
	k, err := webhook.ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Sign(vectorID, vectorTS, []byte(vectorBody)); got != vectorSig {
		t.Errorf("Sign = %s, want the reference %s", got, vectorSig)
	}
	v, err := webhook.NewVerifier(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = at(vectorTS + 10)
	if err := v.Verify(vectorHeader(), []byte(vectorBody)); err != nil {
		t.Errorf("the reference request does not verify: %v", err)
	}
}

func TestVerify(t *testing.T) {
	const other = "whsec_" + "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=" // 32 bytes 0..31
	newKey, _ := webhook.ParseSecret(other)
	oldKey, _ := webhook.ParseSecret(vectorSecret)
	body := []byte(`{"type":"ontime.timer.fired"}`)
	ts := time.Unix(1_800_000_000, 0)
	signed := func(keys ...webhook.Key) http.Header {
		h := http.Header{}
		webhook.SetHeaders(h, keys, "msg_x", ts, body)
		return h
	}
	for _, c := range []struct {
		name    string
		secrets []string
		h       http.Header
		body    []byte
		now     time.Time
		want    error
	}{
		{"signed", []string{other}, signed(newKey), body, ts, nil},
		{"rotation: the receiver knows the new key", []string{other}, signed(newKey, oldKey), body, ts, nil},
		{"rotation: the receiver knows the old key", []string{vectorSecret}, signed(newKey, oldKey), body, ts, nil},
		{"receiver with both keys", []string{other + " " + vectorSecret}, signed(oldKey), body, ts, nil},
		{"another key", []string{vectorSecret}, signed(newKey), body, ts, webhook.ErrSignature},
		{"body changed", []string{other}, signed(newKey), []byte(`{"type":"other"}`), ts, webhook.ErrSignature},
		{"4m59s old", []string{other}, signed(newKey), body, ts.Add(299 * time.Second), nil},
		{"5m01s old", []string{other}, signed(newKey), body, ts.Add(301 * time.Second), webhook.ErrTimestamp},
		{"5m01s ahead", []string{other}, signed(newKey), body, ts.Add(-301 * time.Second), webhook.ErrTimestamp},
		{"no id", []string{other}, without(signed(newKey), webhook.HeaderID), body, ts, webhook.ErrMissingHeader},
		{"no timestamp", []string{other}, without(signed(newKey), webhook.HeaderTimestamp), body, ts, webhook.ErrMissingHeader},
		{"no signature", []string{other}, without(signed(newKey), webhook.HeaderSignature), body, ts, webhook.ErrMissingHeader},
		{"id changed", []string{other}, with(signed(newKey), webhook.HeaderID, "msg_y"), body, ts, webhook.ErrSignature},
		{"timestamp changed", []string{other}, with(signed(newKey), webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix()+1, 10)), body, ts, webhook.ErrSignature},
		{"timestamp not a number", []string{other}, with(signed(newKey), webhook.HeaderTimestamp, "1.5"), body, ts, webhook.ErrTimestamp},
		{"only other versions", []string{other}, with(signed(newKey), webhook.HeaderSignature,
			strings.Replace(signed(newKey).Get(webhook.HeaderSignature), "v1,", "v1a,", 1)), body, ts, webhook.ErrSignature},
		{"garbage around a good one", []string{other}, with(signed(newKey), webhook.HeaderSignature,
			"v1 v1,!!! v2,abc "+signed(newKey).Get(webhook.HeaderSignature)+" v1,"), body, ts, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := webhook.NewVerifier(c.secrets...)
			if err != nil {
				t.Fatal(err)
			}
			v.Now = func() time.Time { return c.now }
			err = v.Verify(c.h, c.body)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("Verify: %v, want %v", err, c.want)
			}
		})
	}
}

func without(h http.Header, k string) http.Header { h.Del(k); return h }
func with(h http.Header, k, v string) http.Header { h.Set(k, v); return h }

func TestParseSecrets(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		fail string
	}{
		{vectorSecret, 1, ""},
		{vectorSecret + "=", 0, "not base64"}, // 24 bytes need no padding; a stray '=' is not base64 of them
		{"whsec_" + strings.Repeat("A", 32) + "==", 0, "not base64"},
		{"whsec_" + strings.Repeat("QUJD", 8), 1, ""}, // 24 bytes
		{"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", 1, ""},
		{"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", 1, ""}, // unpadded
		{" " + vectorSecret + " ,\t" + vectorSecret + "\n", 2, ""},
		{"", 0, "no secret"},
		{" , ", 0, "no secret"},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", 0, `start with "whsec_"`},
		{"whsec_c2hvcnQ=", 0, "holds 5 bytes"},
		{"whsec_" + strings.Repeat("QUJD", 22), 0, "holds 66 bytes"},
		{"whsec_not base64!", 0, "secret 1 of 2"},
		{vectorSecret + " whsec_@@@@", 0, "secret 2 of 2"},
	} {
		keys, err := webhook.ParseSecrets(c.in)
		switch {
		case c.fail == "" && (err != nil || len(keys) != c.n):
			t.Errorf("%q: %d keys, %v; want %d", c.in, len(keys), err, c.n)
		case c.fail != "" && (err == nil || !strings.Contains(err.Error(), c.fail) || !errors.Is(err, webhook.ErrSecret)):
			t.Errorf("%q: %v, want an ErrSecret naming %q", c.in, err, c.fail)
		case c.fail != "" && strings.Contains(err.Error(), "MfKQ9r8G"):
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
	if _, err := webhook.NewVerifier(); !errors.Is(err, webhook.ErrSecret) {
		t.Errorf("NewVerifier(): %v, want ErrSecret", err)
	}
	k, _ := webhook.ParseSecret(vectorSecret)
	b := k.Bytes()
	b[0] ^= 0xff
	if k.Sign(vectorID, vectorTS, []byte(vectorBody)) != vectorSig {
		t.Error("changing the copy Bytes returned changed the key")
	}
}

func TestMessageID(t *testing.T) {
	a := webhook.MessageID("billing.invoices", "inv.42")
	if a != webhook.MessageID("billing.invoices", "inv.42") {
		t.Error("MessageID is not stable")
	}
	if !strings.HasPrefix(a, "msg_") || len(a) != 4+22 || strings.ContainsAny(a, ".=+/ ") {
		t.Errorf("MessageID %q: want msg_ and 22 base64url characters", a)
	}
	for _, other := range []string{
		webhook.MessageID("billing.invoices", "inv.43"),
		webhook.MessageID("billing.invoices2", "inv.42"),
		webhook.MessageID("billing.invoice", "sinv.42"),
	} {
		if other == a {
			t.Errorf("two timers share webhook-id %s", a)
		}
	}
}

func TestBodyBytes(t *testing.T) {
	b64 := "AP8="
	for _, c := range []struct {
		tm   webhook.Timer
		want string
	}{
		{webhook.Timer{ContentType: "text/plain; charset=utf-8", Body: []byte(`"call \"Bob\""`)}, `call "Bob"`},
		{webhook.Timer{ContentType: "application/json", Body: []byte(`{"n":1}`)}, `{"n":1}`},
		{webhook.Timer{BodyBase64: &b64}, "\x00\xff"},
		{webhook.Timer{}, ""},
	} {
		got, err := c.tm.BodyBytes()
		if err != nil || string(got) != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.tm, got, err, c.want)
		}
	}
}
