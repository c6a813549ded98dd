// Package wire holds the JSON shapes of the ontime HTTP API, shared by the
// server, the CLI and the delivery targets. The OpenAPI document
// (server/openapi.json) describes the same shapes.
package wire

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ontime-go/ontime/ontimedriver"
	"github.com/ontime-go/ontime/webhook"
)

// Content types the API gives meaning to.
const (
	ContentTypeText = "text/plain"
	ContentTypeJSON = "application/json"
)

// TimerIn is one timer to schedule (POST /v1/topics/{topic}/timers and each
// item of :batch).
type TimerIn struct {
	ID            string            `json:"id,omitempty"`
	Body          json.RawMessage   `json:"body,omitempty"`
	BodyBase64    *string           `json:"body_base64,omitempty"`
	Delay         *string           `json:"delay,omitempty"`
	At            *string           `json:"at,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	IfAbsent      bool              `json:"if_absent,omitempty"`
}

// Created is the answer to a scheduled timer.
type Created struct {
	ID    string    `json:"id"`
	Topic string    `json:"topic"`
	DueAt time.Time `json:"due_at"`
}

// BatchItem is one result of a batch.
type BatchItem struct {
	ID     string     `json:"id"`
	Topic  string     `json:"topic"`
	DueAt  *time.Time `json:"due_at,omitempty"`
	Status int        `json:"status"`
	Error  *ErrorBody `json:"error,omitempty"`
}

// BatchResult answers a batch: one item per timer, in order.
type BatchResult struct {
	Results []BatchItem `json:"results"`
}

// CancelIn lists the timers a cancel deletes (POST
// /v1/topics/{topic}/timers:cancel). An empty list is refused: it never
// means "all".
type CancelIn struct {
	IDs []string `json:"ids"`
}

// CancelItem is one id's result of a cancel: status 204 (the timer was
// deleted) or 404 (no scheduled or leased timer has that id), with Error.
type CancelItem struct {
	ID     string     `json:"id"`
	Status int        `json:"status"`
	Error  *ErrorBody `json:"error,omitempty"`
}

// CancelResult answers a cancel: how many timers were deleted, and one
// item per id, in order.
type CancelResult struct {
	Cancelled int          `json:"cancelled"`
	Results   []CancelItem `json:"results"`
}

// Timer is a stored timer.
type Timer struct {
	ID            string            `json:"id"`
	Topic         string            `json:"topic"`
	DueAt         time.Time         `json:"due_at"`
	State         string            `json:"state"`
	Attempt       int               `json:"attempt"`
	LeaseUntil    *time.Time        `json:"lease_until,omitempty"`
	LastError     string            `json:"last_error,omitempty"`
	Headers       map[string]string `json:"headers"`
	CorrelationID string            `json:"correlation_id"`
	ContentType   string            `json:"content_type,omitempty"`
	Body          json.RawMessage   `json:"body,omitempty"`
	BodyBase64    *string           `json:"body_base64,omitempty"`
	BodyCut
	// Recurring is a recurring timer's schedule (absent for a plain timer).
	Recurring *Recurring `json:"recurring,omitempty"`
}

// BodyCut stands for a body a list cut (the body_limit parameter): its
// first bytes and its whole size, in place of body and body_base64.
type BodyCut struct {
	// BodyPreview is the body's first bytes (at most body_limit): text and
	// JSON as text, cut at a character boundary; other bytes as "base64:"
	// and their base64.
	BodyPreview *string `json:"body_preview,omitempty"`
	// BodySize is the whole body's size in bytes.
	BodySize int `json:"body_size,omitempty"`
	// BodyTruncated is true when the body was cut.
	BodyTruncated bool `json:"body_truncated,omitempty"`
}

// CutBody cuts a body longer than limit bytes (limit > 0) for a list:
// it returns the BodyCut and true, or false when the body fits.
func CutBody(contentType string, body []byte, limit int) (BodyCut, bool) {
	if limit <= 0 || len(body) <= limit {
		return BodyCut{}, false
	}
	head := body[:limit]
	var p string
	switch mt := mediaType(contentType); {
	case (mt == ContentTypeText || mt == ContentTypeJSON) && utf8.Valid(body):
		for len(head) > 0 && !utf8.Valid(head) { // cut at a character boundary
			head = head[:len(head)-1]
		}
		p = string(head)
	default:
		p = "base64:" + base64.StdEncoding.EncodeToString(head[:limit/4*3])
	}
	return BodyCut{BodyPreview: &p, BodySize: len(body), BodyTruncated: true}, true
}

// TimerPage is a page of timers ordered by due time.
type TimerPage struct {
	Timers     []Timer `json:"timers"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// TopicStats counts one topic's timers.
type TopicStats struct {
	Topic     string `json:"topic"`
	Scheduled int64  `json:"scheduled"`
	Leased    int64  `json:"leased"`
	Dead      int64  `json:"dead"`
	// LastMinute is what this server process saw the topic do in the last
	// minute; absent without workers (the CLI's --redis mode).
	LastMinute *Activity `json:"last_minute,omitempty"`
}

// Activity is a topic's activity over the last minute as one server
// process saw it: timers published through its API, deliveries by its
// workers and their outcomes, and how late they fired (the store's clock
// at the claim minus the due instant). Lateness fields are 0 when nothing
// fired.
type Activity struct {
	Published    int64 `json:"published"`
	Fired        int64 `json:"fired"`
	Acked        int64 `json:"acked"`
	Retried      int64 `json:"retried"`
	DeadLettered int64 `json:"dead_lettered"`
	// Early counts deliveries before their due instant: a defect, always 0.
	Early int64 `json:"early"`
	// LateP50Ms and LateP99Ms are estimates (power-of-two buckets);
	// LateMaxMs is exact.
	LateP50Ms float64 `json:"late_p50_ms"`
	LateP99Ms float64 `json:"late_p99_ms"`
	LateMaxMs float64 `json:"late_max_ms"`
}

// Timeline counts a topic's timers per due-time bucket: Counts[i] are the
// timers due in [Start + i*Step, Start + (i+1)*Step); Before those due
// before Start (overdue, when Start is now), After those due later. A
// leased timer counts at its lease deadline.
type Timeline struct {
	Topic   string    `json:"topic"`
	Start   time.Time `json:"start"`
	Step    string    `json:"step"`
	StepSec float64   `json:"step_sec"`
	Before  int64     `json:"before"`
	Counts  []int64   `json:"counts"`
	After   int64     `json:"after"`
}

// DeadLetter is a timer that was given up on.
type DeadLetter struct {
	ID            string            `json:"id"`
	Topic         string            `json:"topic"`
	DueAt         time.Time         `json:"due_at"`
	DiedAt        time.Time         `json:"died_at"`
	Attempt       int               `json:"attempt"`
	Reason        string            `json:"reason"`
	LastError     string            `json:"last_error,omitempty"`
	Headers       map[string]string `json:"headers"`
	CorrelationID string            `json:"correlation_id"`
	ContentType   string            `json:"content_type,omitempty"`
	Body          json.RawMessage   `json:"body,omitempty"`
	BodyBase64    *string           `json:"body_base64,omitempty"`
	BodyCut
}

// DeadPage is a page of dead letters, oldest death first.
type DeadPage struct {
	Dead       []DeadLetter `json:"dead"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// DeadSelect picks the dead letters of a replay or purge: exactly IDs, or
// every one of the topic with All. Neither (or an empty IDs) is refused:
// an empty list never means "all".
type DeadSelect struct {
	IDs []string `json:"ids,omitempty"`
	All bool     `json:"all,omitempty"`
}

// Count answers replay and purge.
type Count struct {
	Count int `json:"count"`
}

// Event is one fired timer on the watch stream (the data of SSE event
// "timer"), and the data of a webhook's envelope: the public
// webhook.Timer, so that Go receivers decode both with one type.
type Event = webhook.Timer

// NewEvent builds the watch event of a fired timer. Nil headers become an
// empty object; the body goes to "body" or "body_base64" as BodyJSON says.
func NewEvent(id, topic string, due time.Time, attempt int, headers map[string]string, correlationID, contentType string, body []byte) Event {
	ev := Event{
		ID: id, Topic: topic, DueAt: due.UTC(), Attempt: attempt, Headers: headers,
		CorrelationID: correlationID, ContentType: contentType,
	}
	if ev.Headers == nil {
		ev.Headers = map[string]string{}
	}
	ev.Body, ev.BodyBase64 = BodyJSON(contentType, body)
	return ev
}

// WatchAck confirms events of a watch stream (POST
// /v1/topics/{topic}/watch:ack): their ids, the "id:" of each event.
type WatchAck struct {
	IDs []string `json:"ids"`
}

// WatchAcked answers a WatchAck: how many events were confirmed, and the
// ids the server did not hold unconfirmed (not sent, confirmed already, or
// given back because their stream ended or their time ran out: their
// timers are, or will be, sent again).
type WatchAcked struct {
	Acked   int      `json:"acked"`
	Unknown []string `json:"unknown"`
}

// MessageIn is the simple API: POST /messages.
type MessageIn struct {
	Message  *string  `json:"message"`
	DelaySec *float64 `json:"delay_sec"`
}

// MessageOut answers POST /messages.
type MessageOut struct {
	ID           string `json:"id"`
	ScheduledFor int64  `json:"scheduled_for"`
}

// Stats is GET /v1/stats.
type Stats struct {
	Store     string `json:"store"`
	UptimeSec int64  `json:"uptime_sec"`
	Topics    int    `json:"topics"`
	Scheduled int64  `json:"scheduled"`
	Leased    int64  `json:"leased"`
	Dead      int64  `json:"dead"`
	// Delivery counters of this server process since it started.
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	Workers   int   `json:"workers"`
	Watchers  int   `json:"watchers"`
}

// Error is every error response.
type Error struct {
	Error ErrorBody `json:"error"`
}

// Status answers /healthz ("ok") and /readyz ("ready"; "degraded" while
// some topics cannot be served, listed for an admin token; or "unavailable"
// with the request id, and the store's error for an admin token).
type Status struct {
	Status    string `json:"status"`
	RequestID string `json:"request_id,omitempty"`
	Error     string `json:"error,omitempty"`
	// UnavailableTopics, with "degraded" and for an admin token only, are
	// the topics whose store calls fail although the store answers.
	UnavailableTopics []UnavailableTopic `json:"unavailable_topics,omitempty"`
}

// UnavailableTopic is a topic the store cannot serve now (see
// ontimedriver.TopicFaults).
type UnavailableTopic struct {
	Topic string    `json:"topic"`
	Since time.Time `json:"since"`
	Error string    `json:"error"`
}

// ErrorBody says what went wrong: Code is stable, Message is for people.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// RequestID is the answer's request id (the X-Request-Id header),
	// which the server's log lines about the request carry.
	RequestID string `json:"request_id,omitempty"`
}

// ValidateTopic checks a topic name of the API and the server's
// configuration: the library's rules (ontimedriver.ValidateTopic), and not
// "." or "..", which cannot be a segment of a URL path (clients and
// servers resolve them to the parent). The error wraps
// ontimedriver.ErrInvalid.
func ValidateTopic(topic string) error {
	if err := ontimedriver.ValidateTopic(topic); err != nil {
		return err
	}
	if topic == "." || topic == ".." {
		return fmt.Errorf("%w: topic %q is refused: \".\" and \"..\" cannot be a URL path segment", ontimedriver.ErrInvalid, topic)
	}
	return nil
}

// ValidateID checks a timer id of the API: the library's rules
// (ontimedriver.ValidateID), and not "." or ".." (see ValidateTopic).
func ValidateID(id string) error {
	if err := ontimedriver.ValidateID(id); err != nil {
		return err
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: id %q is refused: \".\" and \"..\" cannot be a URL path segment", ontimedriver.ErrInvalid, id)
	}
	return nil
}

// ValidHeaderName reports whether s can be an HTTP field name: a non-empty
// RFC 9110 token (ASCII letters, digits and !#$%&'*+-.^_`|~).
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// HeaderValueCTL returns the index of the first control character of an
// HTTP field value (RFC 9110: bytes 0x00-0x1F and 0x7F, horizontal tab
// excepted), or -1 when there is none.
func HeaderValueCTL(v string) int {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return i
		}
	}
	return -1
}

// BodyJSON picks the JSON form of a stored body: text becomes a JSON string
// ("body"), JSON stays JSON ("body"), anything else (bytes, invalid text or
// JSON) goes to "body_base64". An empty body has neither.
func BodyJSON(contentType string, body []byte) (json.RawMessage, *string) {
	if len(body) == 0 {
		return nil, nil
	}
	switch mediaType(contentType) {
	case ContentTypeText:
		if utf8.Valid(body) {
			b, err := json.Marshal(string(body))
			if err == nil {
				return b, nil
			}
		}
	case ContentTypeJSON:
		if json.Valid(body) {
			return json.RawMessage(body), nil
		}
	}
	s := base64.StdEncoding.EncodeToString(body)
	return nil, &s
}

func mediaType(ct string) string {
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(ct))
	}
	return mt
}

// TextOf turns a body into one printable line: text and JSON as they are,
// other bytes that are valid UTF-8 too, anything else as "base64:...".
// Line breaks are escaped as \n and \r so that a message stays one line.
func TextOf(body []byte) string {
	if !utf8.Valid(body) {
		return "base64:" + base64.StdEncoding.EncodeToString(body)
	}
	s := string(body)
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
	}
	return s
}

// WatchLine formats a fired timer as ontime watch prints it:
// "2026-11-22 10:15:03: <body>", the due time in UTC.
func WatchLine(due time.Time, body []byte) string {
	return due.UTC().Format("2006-01-02 15:04:05") + ": " + TextOf(body)
}
