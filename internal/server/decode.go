package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver"
)

// decodeJSON reads one JSON value of at most limit bytes into v, refusing
// unknown fields and trailing data.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) *apiError {
	data, e := readBody(w, r, limit)
	if e != nil {
		return e
	}
	return unmarshalJSON(data, v)
}

// readBody reads a request body of at most limit bytes that is not empty
// (JSON whitespace counts as empty).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	body := http.MaxBytesReader(w, r.Body, limit)
	data, err := readAll(body, min(r.ContentLength, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return nil, errorf(http.StatusRequestEntityTooLarge, "request_too_large", "the request is over %d bytes", limit)
		case errors.Is(err, errBodyOverloaded):
			w.Header().Set("Retry-After", "1")
			return nil, errorf(http.StatusServiceUnavailable, "overloaded", "the server holds too many request bytes at once (max_inflight_bytes); retry later")
		case errors.As(err, &ne) && ne.Timeout():
			if rec, ok := w.(*statusRecorder); ok && rec.body.slow {
				return nil, errorf(http.StatusRequestTimeout, "request_timeout", "the request body arrived slower than the server's min_body_rate (%d bytes/s over %s)", rec.srv.o.MinBodyRate, BodyRateWindow)
			}
			return nil, errorf(http.StatusRequestTimeout, "request_timeout", "the request body did not arrive within the server's read_timeout")
		}
		return nil, errorf(http.StatusBadRequest, "malformed_json", "reading the request: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errorf(http.StatusBadRequest, "malformed_json", "the request body is empty; send a JSON document")
	}
	return data, nil
}

// readAll is io.ReadAll with a first buffer of size+1 bytes when the size
// is known and small (a declared Content-Length): one read then returns
// the whole body and its end.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 || size > 64<<10 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// unmarshalJSON decodes data, one JSON value, into v, refusing unknown
// fields, trailing data, and what checkStrict refuses (duplicate keys,
// keys in another letter case, invalid UTF-8, lone surrogates).
func unmarshalJSON(data []byte, v any) *apiError {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "malformed_json", "data after the JSON document")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return errorf(http.StatusBadRequest, "malformed_json", "data after the JSON document")
	}
	return checkStrict(data, reflect.TypeOf(v).Elem())
}

func jsonError(err error) *apiError {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return errorf(http.StatusBadRequest, "malformed_json", "malformed JSON at byte %d: %v", se.Offset, err)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return errorf(http.StatusBadRequest, "malformed_json", "the request is a JSON %s; want %s", te.Value, jsonKind(te.Type.Kind().String()))
		}
		return errorf(http.StatusBadRequest, "invalid_field", "field %q is a JSON %s; want %s", field, te.Value, jsonKind(te.Type.Kind().String()))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return errorf(http.StatusBadRequest, "unknown_field", "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "malformed_json", "the JSON document is cut short")
	}
	return errorf(http.StatusBadRequest, "malformed_json", "malformed JSON: %v", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "ptr", "string":
		return "a string"
	case "float64", "int", "int64":
		return "a number"
	case "bool":
		return "a boolean"
	}
	return goKind
}

// Header limits.
const (
	maxHeaders        = 64
	maxHeaderKeyLen   = 256
	maxHeaderValueLen = 8192
)

// parsed is a validated TimerIn.
type parsed struct {
	timer    ontime.Timer
	ifAbsent bool
}

// parseTimer validates one timer of a request.
func (s *Server) parseTimer(in *wire.TimerIn) (parsed, *apiError) {
	var p parsed
	t := &p.timer
	p.ifAbsent = in.IfAbsent
	if in.ID != "" {
		if e := checkID(in.ID); e != nil {
			return p, e
		}
		t.ID = in.ID
	}
	switch {
	case in.Delay != nil && in.At != nil:
		return p, errorf(http.StatusBadRequest, "delay_and_at", "give either delay or at, not both")
	case in.Delay == nil && in.At == nil:
		return p, errorf(http.StatusBadRequest, "missing_due", `give delay (a duration such as "90s"; "0s" for now) or at (an RFC 3339 instant)`)
	case in.Delay != nil:
		d, err := time.ParseDuration(*in.Delay)
		if err != nil {
			return p, errorf(http.StatusBadRequest, "invalid_delay", "delay %q is not a duration such as \"90s\" or \"1h30m\"", *in.Delay)
		}
		if d < 0 {
			return p, errorf(http.StatusBadRequest, "invalid_delay", "delay %q is negative", *in.Delay)
		}
		t.Delay = d
	default:
		at, e := parseAt(*in.At)
		if e != nil {
			return p, e
		}
		t.At = at
	}
	if in.BodyBase64 != nil && len(in.Body) > 0 {
		return p, errorf(http.StatusBadRequest, "invalid_body", "give either body or body_base64, not both")
	}
	switch {
	case in.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*in.BodyBase64)
		if err != nil {
			return p, errorf(http.StatusBadRequest, "invalid_body", "body_base64 is not standard base64: %v", err)
		}
		if int64(len(b)) > s.o.MaxBodyBytes {
			return p, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "the body is %d bytes; the limit is %d", len(b), s.o.MaxBodyBytes)
		}
		t.Body = b
	case len(in.Body) > 0 && !bytes.Equal(in.Body, []byte("null")):
		raw := bytes.TrimSpace(in.Body)
		if raw[0] == '"' {
			text, ok := plainJSONString(raw)
			if !ok {
				if err := json.Unmarshal(raw, &text); err != nil {
					return p, errorf(http.StatusBadRequest, "invalid_body", "body: %v", err)
				}
			}
			if int64(len(text)) > s.o.MaxBodyBytes {
				return p, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "the body is %d bytes; the limit is %d", len(text), s.o.MaxBodyBytes)
			}
			t.Body = text
		} else {
			var buf bytes.Buffer
			if err := json.Compact(&buf, raw); err != nil {
				return p, errorf(http.StatusBadRequest, "invalid_body", "body: %v", err)
			}
			if int64(buf.Len()) > s.o.MaxBodyBytes {
				return p, errorf(http.StatusRequestEntityTooLarge, "body_too_large", "the body is %d bytes as compact JSON; the limit is %d", buf.Len(), s.o.MaxBodyBytes)
			}
			t.Body = json.RawMessage(buf.Bytes())
		}
	}
	if len(in.Headers) > maxHeaders {
		return p, errorf(http.StatusBadRequest, "invalid_header", "%d headers; the limit is %d", len(in.Headers), maxHeaders)
	}
	// Sorted, so that the header an error names does not depend on map order.
	var names []string
	if len(in.Headers) > 0 {
		names = slices.Sorted(maps.Keys(in.Headers))
	}
	for _, k := range names {
		v := in.Headers[k]
		switch {
		case k == "":
			return p, errorf(http.StatusBadRequest, "invalid_header", "a header name is empty")
		case strings.EqualFold(k, "correlation_id") || strings.EqualFold(k, "content-type"):
			return p, errorf(http.StatusBadRequest, "invalid_header", "header %q is reserved (use the correlation_id field; the content type follows the body)", k)
		case len(k) > maxHeaderKeyLen:
			return p, errorf(http.StatusBadRequest, "invalid_header", "a header name is %d bytes; the limit is %d", len(k), maxHeaderKeyLen)
		case !wire.ValidHeaderName(k):
			return p, errorf(http.StatusBadRequest, "invalid_header", "header name %q is not an HTTP field name (RFC 9110 token: ASCII letters, digits and !#$%%&'*+-.^_`|~)", k)
		case len(v) > maxHeaderValueLen:
			return p, errorf(http.StatusBadRequest, "invalid_header", "header %q has a %d-byte value; the limit is %d", k, len(v), maxHeaderValueLen)
		case !utf8.ValidString(v):
			return p, errorf(http.StatusBadRequest, "invalid_header", "header %q: the value is not valid UTF-8", k)
		case wire.HeaderValueCTL(v) >= 0:
			return p, errorf(http.StatusBadRequest, "invalid_header", "header %q: the value holds control character 0x%02x at byte %d (only tab is allowed)", k, v[wire.HeaderValueCTL(v)], wire.HeaderValueCTL(v))
		}
	}
	if len(names) > 1 {
		// HTTP field names are case-insensitive: "Tenant" and "tenant"
		// would reach a webhook as one field, with either value.
		lower := make(map[string]string, len(names))
		for _, k := range names {
			l := strings.ToLower(k)
			if other, dup := lower[l]; dup {
				return p, errorf(http.StatusBadRequest, "invalid_header", "headers %q and %q name the same HTTP field (names are case-insensitive); give it once", other, k)
			}
			lower[l] = k
		}
	}
	t.Headers = in.Headers
	if in.CorrelationID != "" {
		if err := ontimedriver.ValidateID(in.CorrelationID); err != nil {
			return p, errorf(http.StatusBadRequest, "invalid_correlation_id", "correlation_id: %s", strings.ReplaceAll(trimInvalid(err), "id ", ""))
		}
		t.CorrelationID = in.CorrelationID
	}
	return p, nil
}

// parseAt reads an RFC 3339 instant that has a zone (Z or an offset),
// within the range a store keeps (ontimedriver.MinDue, 1970, to MaxDue,
// the end of year 9999). Every instant of the API goes through it, so an
// instant before 1970 is refused alike everywhere, year 1 included (it is
// Go's zero time, which the library reads as "no instant given").
func parseAt(s string) (time.Time, *apiError) {
	at, err := time.Parse(time.RFC3339Nano, s)
	if err == nil {
		switch {
		case at.Before(ontimedriver.MinDue):
			return time.Time{}, errorf(http.StatusBadRequest, "invalid_at", "at %q is before 1970-01-01T00:00:00Z, the earliest instant the store keeps", s)
		case at.After(ontimedriver.MaxDue):
			return time.Time{}, errorf(http.StatusBadRequest, "invalid_at", "at %q is after %s, the latest instant the store keeps", s, ontimedriver.MaxDue.Format(time.RFC3339Nano))
		}
		return at, nil
	}
	if _, err2 := time.Parse("2006-01-02T15:04:05.999999999", s); err2 == nil {
		return time.Time{}, errorf(http.StatusBadRequest, "invalid_at", "at %q has no time zone; add Z or an offset such as +02:00", s)
	}
	return time.Time{}, errorf(http.StatusBadRequest, "invalid_at", "at %q is not an RFC 3339 instant such as 2026-11-22T10:15:03Z", s)
}

func trimInvalid(err error) string {
	return strings.TrimPrefix(err.Error(), ontimedriver.ErrInvalid.Error()+": ")
}

// topicOf validates the {topic} path value.
func topicOf(r *http.Request) (string, *apiError) {
	topic := r.PathValue("topic")
	if err := wire.ValidateTopic(topic); err != nil {
		return "", errorf(http.StatusBadRequest, "invalid_topic", "%s", trimInvalid(err))
	}
	return topic, nil
}

// idOf validates the {id} path value.
func idOf(r *http.Request) (string, *apiError) {
	id := r.PathValue("id")
	if e := checkID(id); e != nil {
		return "", e
	}
	return id, nil
}

// checkID validates a timer id of the API: the library's rules, and not
// "." or "..", which cannot be a path segment of a URL (clients and
// ServeMux resolve them).
func checkID(id string) *apiError {
	if err := wire.ValidateID(id); err != nil {
		return errorf(http.StatusBadRequest, "invalid_id", "%s", trimInvalid(err))
	}
	return nil
}

// singleLimit is the request size cap of one timer: the body limit, room
// for base64 or JSON escaping, and the other fields.
func (s *Server) singleLimit() int64 { return 2*s.o.MaxBodyBytes + 64<<10 }

// batchLimit is the request size cap of a batch.
func (s *Server) batchLimit() int64 { return BatchRequestLimit(s.o.MaxBodyBytes) }

// BatchRequestLimit is the largest request the API reads (a batch, or a
// dead-letter replay or purge) for a server whose body limit is maxBody:
// 16 MiB, or more when one timer's request can be larger.
func BatchRequestLimit(maxBody int64) int64 {
	if maxBody <= 0 {
		maxBody = 1 << 20
	}
	return max(16<<20, 2*maxBody+64<<10)
}
