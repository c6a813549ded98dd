package apitest

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CheckStandardWebhook verifies a webhook request the way the Standard
// Webhooks specification (spec/standard-webhooks.md, "Signature scheme",
// "Webhook headers", "Verifying signatures") describes it, for the tests:
// written from the specification's text, independently of package webhook,
// which the server signs with, so that a mistake there does not hide
// itself.
//
//   - The secrets are "whsec_" and base64; the HMAC key is the decoded
//     bytes.
//   - The signed content is "{webhook-id}.{webhook-timestamp}.{body}".
//   - webhook-signature is a space-delimited list of "v1,<base64
//     HMAC-SHA256>"; any one made with any secret verifies.
//   - webhook-timestamp is integer unix seconds; more than 5 minutes from
//     now, either way, is refused.
func CheckStandardWebhook(h http.Header, body []byte, secrets []string, now time.Time) error {
	msgID := h.Get("Webhook-Id")
	stamp := h.Get("Webhook-Timestamp")
	list := h.Get("Webhook-Signature")
	if msgID == "" || stamp == "" || list == "" {
		return errors.New("a webhook-id, webhook-timestamp or webhook-signature header is missing")
	}
	sec, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not integer unix seconds", stamp)
	}
	const tolerance = 5 * 60
	if age := now.Unix() - sec; age > tolerance || age < -tolerance {
		return fmt.Errorf("webhook-timestamp is %d s from now: outside the 5 minute tolerance", age)
	}
	content := []byte(fmt.Sprintf("%s.%s.%s", msgID, stamp, body))
	for _, secret := range secrets {
		raw, ok := strings.CutPrefix(secret, "whsec_")
		if !ok {
			return fmt.Errorf("secret without the whsec_ prefix")
		}
		key, err := base64.StdEncoding.DecodeString(raw)
		if err != nil {
			return fmt.Errorf("secret is not base64: %v", err)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write(content)
		expected := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		for _, sig := range strings.Split(list, " ") {
			if subtle.ConstantTimeCompare([]byte(sig), []byte(expected)) == 1 {
				return nil
			}
		}
	}
	return errors.New("no v1 signature matches any secret")
}
