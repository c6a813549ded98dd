package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ontime-go/ontime/webhook"
)

// A receiver of an ontime http target: it verifies the signature and the
// timestamp (a request signed more than 5 minutes ago is refused, so a
// captured request cannot be replayed later), then reads the signed
// envelope, whose topic and attempt it can trust.
func Example_receiver() {
	// The target's secret (in production: os.Getenv; during a rotation,
	// both secrets, space-separated).
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		panic(err)
	}
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		if err := v.Verify(r.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var ev webhook.Event
		if err := json.Unmarshal(body, &ev); err != nil || ev.Type != webhook.EventType {
			http.Error(w, "not an ontime timer event", http.StatusBadRequest)
			return
		}
		msg, err := ev.Data.BodyBytes()
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		fmt.Printf("%s/%s attempt %d: %s\n", ev.Data.Topic, ev.Data.ID, ev.Data.Attempt, msg)
		w.WriteHeader(http.StatusNoContent)
	})

	// What `ontime serve` sends, signed at signedAt.
	send := func(signedAt time.Time) int {
		due := time.Date(2026, 11, 22, 10, 15, 3, 0, time.UTC)
		body, _ := json.Marshal(webhook.Event{Type: webhook.EventType, Timestamp: due, Data: webhook.Timer{
			ID: "call-bob", Topic: "reminders", DueAt: due, Attempt: 1, Headers: map[string]string{},
			CorrelationID: "call-bob", ContentType: "text/plain", Body: json.RawMessage(`"call Bob"`),
		}})
		key, _ := webhook.ParseSecret(secret)
		req := httptest.NewRequest(http.MethodPost, "/hooks/ontime", bytes.NewReader(body))
		webhook.SetHeaders(req.Header, []webhook.Key{key}, webhook.MessageID("reminders", "call-bob"), signedAt, body)
		rec := httptest.NewRecorder()
		receiver.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println(send(time.Now()))
	fmt.Println(send(time.Now().Add(-6 * time.Minute)))
	// Output:
	// reminders/call-bob attempt 1: call Bob
	// 204
	// 401
}
