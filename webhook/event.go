package webhook

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"strings"
	"time"
)

// EventType is the type of the event an http target sends for a fired
// timer.
const EventType = "ontime.timer.fired"

// Event is the body an http target sends with payload = "envelope" (the
// default): the payload structure the specification recommends, with the
// fired timer in Data. Since the body is what the signature covers, the
// topic, the id and the attempt are signed with it.
type Event struct {
	// Type is EventType.
	Type string `json:"type"`
	// Timestamp is when the event occurred: the instant this delivery of
	// the timer became due (Data.DueAt).
	Timestamp time.Time `json:"timestamp"`
	// Data is the timer.
	Data Timer `json:"data"`
}

// Timer is a fired timer as ontime sends it: in a webhook's Event, and as
// the data of an event of a watch stream (GET /v1/topics/{topic}/watch).
type Timer struct {
	// ID is the timer id.
	ID string `json:"id"`
	// Topic is the timer's topic.
	Topic string `json:"topic"`
	// DueAt is the instant this delivery became due: the due time on the
	// first attempt, a retry's own due time after.
	DueAt time.Time `json:"due_at"`
	// Attempt is 1 on the first delivery and grows with each retry.
	Attempt int `json:"attempt"`
	// Headers are the timer's headers, as the publisher set them.
	Headers map[string]string `json:"headers"`
	// CorrelationID is the publisher's correlation id (default: the id).
	CorrelationID string `json:"correlation_id"`
	// ContentType is the body's type, when the publisher gave one.
	ContentType string `json:"content_type,omitempty"`
	// Body holds a text body as a JSON string and a JSON body as itself.
	Body json.RawMessage `json:"body,omitempty"`
	// BodyBase64 holds any other body, in standard base64.
	BodyBase64 *string `json:"body_base64,omitempty"`
}

// BodyBytes returns the body as it was published: the text of a text
// body, the JSON of a JSON body, the decoded bytes of a base64 one.
func (t *Timer) BodyBytes() ([]byte, error) {
	if t.BodyBase64 != nil {
		return base64.StdEncoding.DecodeString(*t.BodyBase64)
	}
	if len(t.Body) == 0 {
		return nil, nil
	}
	if mt, _, err := mime.ParseMediaType(t.ContentType); err == nil && mt == "text/plain" ||
		err != nil && strings.EqualFold(strings.TrimSpace(t.ContentType), "text/plain") {
		var s string
		if err := json.Unmarshal(t.Body, &s); err != nil {
			return nil, err
		}
		return []byte(s), nil
	}
	return t.Body, nil
}
