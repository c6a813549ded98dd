package ontime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/ontime-go/ontime/envelope"
)

// A timer's payload is its message in the faststream envelope
// (package envelope): the body and its headers, among them the
// correlation id and the content type. This file is the one place the
// library writes payloads (publish) and reads them (delivery, inspection,
// dead letters).

// encodePayload writes a message's envelope: correlation id corr, the
// content type of the body (see encodeBody) and the user headers in key
// order (the Python writer keeps insertion order; readers see the same
// headers either way).
func encodePayload(corr string, body any, headers map[string]string) ([]byte, error) {
	b, ct, err := encodeBody(body)
	if err != nil {
		return nil, err
	}
	var hs []envelope.Header
	if len(headers) > 0 {
		keys := make([]string, 0, len(headers))
		for k := range headers {
			if k == "" {
				return nil, invalidf("a header key is empty")
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		hs = make([]envelope.Header, len(keys))
		for i, k := range keys {
			hs[i] = envelope.Header{Key: k, Value: headers[k]}
		}
	}
	payload, err := envelope.AppendEncode(make([]byte, 0, 64+len(b)+len(corr)), corr, ct, hs, b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return payload, nil
}

// encodeBody follows the faststream writer: text → text/plain, bytes → no
// content type, anything else → compact JSON without HTML escaping.
func encodeBody(body any) ([]byte, string, error) {
	switch b := body.(type) {
	case nil:
		return nil, "", nil
	case string:
		return []byte(b), envelope.ContentTypeText, nil
	case []byte:
		return b, "", nil
	case json.RawMessage:
		if !json.Valid(b) {
			return nil, "", invalidf("body is a json.RawMessage that is not valid JSON")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			return nil, "", invalidf("body: %v", err)
		}
		return buf.Bytes(), envelope.ContentTypeJSON, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, "", invalidf("body of type %T does not marshal to JSON: %v", body, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), envelope.ContentTypeJSON, nil
}

// decodePayload decodes a stored payload: leniently (envelope.Decode:
// legacy JSON forms, raw bodies) for a store whose payloads other programs
// may have written (ontimedriver.LegacyPayloads), else strictly
// (envelope.DecodeBinary). It is the one place that choice is made, for
// delivery and inspection alike.
func decodePayload(lenient bool, payload []byte) (*envelope.Message, error) {
	if lenient {
		return envelope.Decode(payload)
	}
	return envelope.DecodeBinary(payload)
}

// splitHeaders separates the well-known headers from the user's
// (envelope.Message.Split). The correlation id is id when the envelope has
// none (legacy and raw payloads).
func splitHeaders(env *envelope.Message, id string) (corr, ct string, user map[string]string) {
	corr, ct, user = env.Split()
	if corr == "" {
		corr = id
	}
	return corr, ct, user
}

// storedMessage is a stored payload as inspection shows it (Get, List,
// DeadLetters).
type storedMessage struct {
	CorrelationID, ContentType string
	Headers                    map[string]string
	Body                       []byte
	// DecodeError is set when the payload does not decode; Body is then
	// the payload as stored.
	DecodeError string
}

// readStored decodes the payload of timer id for inspection.
func readStored(lenient bool, id string, payload []byte) storedMessage {
	env, err := decodePayload(lenient, payload)
	if err != nil {
		return storedMessage{Body: payload, DecodeError: err.Error()}
	}
	var m storedMessage
	m.CorrelationID, m.ContentType, m.Headers = splitHeaders(env, id)
	m.Body = env.Body
	return m
}
