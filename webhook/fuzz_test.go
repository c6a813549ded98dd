package webhook_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime/webhook"
)

// FuzzVerify: Verify never panics on any headers and body, and never
// accepts a request unless one of its signatures is the key's.
func FuzzVerify(f *testing.F) {
	f.Add(vectorID, strconv.Itoa(vectorTS), vectorSig, []byte(vectorBody))
	f.Add("msg_x", "-1", "v1, v1,==== v1a,abc", []byte{})
	f.Add("a.b", "99999999999999999999", "v1,"+strings.Repeat("A", 44), []byte("x"))
	v, err := webhook.NewVerifier(vectorSecret)
	if err != nil {
		f.Fatal(err)
	}
	key, _ := webhook.ParseSecret(vectorSecret)
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(webhook.HeaderID, id)
		h.Set(webhook.HeaderTimestamp, ts)
		h.Set(webhook.HeaderSignature, sig)
		sec, perr := strconv.ParseInt(h.Get(webhook.HeaderTimestamp), 10, 64)
		if perr == nil {
			v.Now = func() time.Time { return time.Unix(sec, 0) }
		}
		if v.Verify(h, body) == nil {
			want, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(key.Sign(h.Get(webhook.HeaderID), sec, body), "v1,"))
			for _, f := range strings.Fields(h.Get(webhook.HeaderSignature)) {
				if enc, ok := strings.CutPrefix(f, "v1,"); ok {
					if got, err := base64.StdEncoding.DecodeString(enc); err == nil && bytes.Equal(got, want) {
						return
					}
				}
			}
			t.Fatalf("accepted %q without the key's signature", h.Get(webhook.HeaderSignature))
		}
	})
}

// FuzzParseSecrets: any input either fails with ErrSecret or gives keys of
// 24 to 64 bytes.
func FuzzParseSecrets(f *testing.F) {
	f.Add(vectorSecret)
	f.Add("whsec_ whsec_= ,whsec_AAAA")
	f.Add("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8")
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := webhook.ParseSecrets(s)
		if err != nil {
			return
		}
		for _, k := range keys {
			if n := len(k.Bytes()); n < webhook.MinKeyBytes || n > webhook.MaxKeyBytes {
				t.Fatalf("%q gave a key of %d bytes", s, n)
			}
		}
	})
}
