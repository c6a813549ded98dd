// Package apitest checks HTTP answers against the API's OpenAPI document,
// for tests. It understands the subset of OpenAPI 3 / JSON Schema that
// the document uses: $ref, type, required, properties,
// additionalProperties, items, enum, format date-time, minimum, maximum,
// minItems, maxItems, minLength and maxLength.
package apitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Spec is a loaded OpenAPI document.
type Spec struct {
	doc   map[string]any
	paths []pathTemplate
}

type pathTemplate struct {
	raw      string
	segs     []string
	literals int
}

// Load parses an OpenAPI document.
func Load(data []byte) (*Spec, error) {
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		return nil, errors.New("openapi: no paths")
	}
	s := &Spec{doc: doc}
	for p := range paths {
		pt := pathTemplate{raw: p, segs: strings.Split(strings.Trim(p, "/"), "/")}
		for _, seg := range pt.segs {
			if !strings.HasPrefix(seg, "{") {
				pt.literals++
			}
		}
		s.paths = append(s.paths, pt)
	}
	sort.Slice(s.paths, func(i, j int) bool { return s.paths[i].raw < s.paths[j].raw })
	return s, nil
}

// match finds the path template of an escaped request path.
func (s *Spec) match(escapedPath string) (string, bool) {
	// Only the leading slash goes: "/v1/topics/t/timers/" has an empty
	// last segment, the {id} of /v1/topics/{topic}/timers/{id}.
	segs := strings.Split(strings.TrimPrefix(escapedPath, "/"), "/")
	best, bestLit := "", -1
	for _, pt := range s.paths {
		if len(pt.segs) != len(segs) {
			continue
		}
		ok := true
		for i, seg := range pt.segs {
			if strings.HasPrefix(seg, "{") {
				continue // may be empty: the server answers 400 for that
			}
			if seg != segs[i] {
				ok = false
				break
			}
		}
		if ok && pt.literals > bestLit {
			best, bestLit = pt.raw, pt.literals
		}
	}
	return best, bestLit >= 0
}

// Check validates one answer: the operation and status must be documented,
// and a JSON body must match the documented schema.
func (s *Spec) Check(method, escapedPath string, status int, contentType string, body []byte) error {
	tpl, ok := s.match(escapedPath)
	if !ok {
		if status == http.StatusNotFound {
			// An undocumented path answered 404: right, with the error shape.
			if err := s.CheckSchema("Error", body); err != nil {
				return fmt.Errorf("openapi: %s %s 404: %w", method, escapedPath, err)
			}
			return nil
		}
		return fmt.Errorf("openapi: path %s is not documented", escapedPath)
	}
	pathItem := s.doc["paths"].(map[string]any)[tpl].(map[string]any)
	op, ok := pathItem[strings.ToLower(method)].(map[string]any)
	if !ok {
		if status == http.StatusMethodNotAllowed {
			return nil // an undocumented method answered 405: right
		}
		return fmt.Errorf("openapi: %s %s is not documented", method, tpl)
	}
	responses, _ := op["responses"].(map[string]any)
	resp, ok := responses[strconv.Itoa(status)].(map[string]any)
	if !ok {
		resp, ok = responses["default"].(map[string]any)
	}
	if !ok {
		return fmt.Errorf("openapi: %s %s answered %d, which is not documented", method, tpl, status)
	}
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(bytes.TrimSpace(body)) > 0 {
			return fmt.Errorf("openapi: %s %s %d documents no body but got %q", method, tpl, status, body)
		}
		return nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	media, ok := content[mt].(map[string]any)
	if !ok {
		return fmt.Errorf("openapi: %s %s %d: content type %q is not documented", method, tpl, status, contentType)
	}
	if mt != "application/json" {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("openapi: %s %s %d: body is not JSON: %v", method, tpl, status, err)
	}
	if err := s.validate(media["schema"], v, "$"); err != nil {
		return fmt.Errorf("openapi: %s %s %d: %w", method, tpl, status, err)
	}
	return nil
}

// CheckSchema validates JSON data against components.schemas[name].
func (s *Spec) CheckSchema(name string, data []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return s.validate(map[string]any{"$ref": "#/components/schemas/" + name}, v, "$")
}

func (s *Spec) resolve(ref string) (any, error) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("unsupported $ref %q", ref)
	}
	var cur any = s.doc
	for _, part := range strings.Split(p, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("bad $ref %q", ref)
		}
		if cur, ok = m[part]; !ok {
			return nil, fmt.Errorf("dangling $ref %q", ref)
		}
	}
	return cur, nil
}

func (s *Spec) validate(schemaAny, v any, at string) error {
	schema, ok := schemaAny.(map[string]any)
	if !ok || len(schema) == 0 {
		return nil // {} allows anything
	}
	if ref, ok := schema["$ref"].(string); ok {
		target, err := s.resolve(ref)
		if err != nil {
			return err
		}
		return s.validate(target, v, at)
	}
	if enum, ok := schema["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
		}
	}
	typ, _ := schema["type"].(string)
	switch typ {
	case "":
		return nil
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %T", at, v)
		}
		props, _ := schema["properties"].(map[string]any)
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if _, ok := obj[r.(string)]; !ok {
					return fmt.Errorf("%s: required field %q is missing", at, r)
				}
			}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k]; ok {
				if err := s.validate(ps, obj[k], at+"."+k); err != nil {
					return err
				}
				continue
			}
			switch ap := schema["additionalProperties"].(type) {
			case bool:
				if !ap {
					return fmt.Errorf("%s: field %q is not documented", at, k)
				}
			case map[string]any:
				if err := s.validate(ap, obj[k], at+"."+k); err != nil {
					return err
				}
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array, got %T", at, v)
		}
		if n, ok := num(schema["minItems"]); ok && float64(len(arr)) < n {
			return fmt.Errorf("%s: %d items, want at least %v", at, len(arr), n)
		}
		if n, ok := num(schema["maxItems"]); ok && float64(len(arr)) > n {
			return fmt.Errorf("%s: %d items, want at most %v", at, len(arr), n)
		}
		for i, it := range arr {
			if err := s.validate(schema["items"], it, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: want a string, got %T", at, v)
		}
		if n, ok := num(schema["minLength"]); ok && float64(len(str)) < n {
			return fmt.Errorf("%s: string shorter than %v", at, n)
		}
		if n, ok := num(schema["maxLength"]); ok && float64(len(str)) > n {
			return fmt.Errorf("%s: string longer than %v", at, n)
		}
		if schema["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				return fmt.Errorf("%s: %q is not an RFC 3339 date-time", at, str)
			}
		}
	case "integer", "number":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: want a %s, got %T", at, typ, v)
		}
		f, err := n.Float64()
		if err != nil {
			return fmt.Errorf("%s: %v", at, err)
		}
		if typ == "integer" {
			if _, err := n.Int64(); err != nil {
				return fmt.Errorf("%s: %s is not an integer", at, n)
			}
		}
		if m, ok := num(schema["minimum"]); ok && f < m {
			return fmt.Errorf("%s: %v is below the minimum %v", at, f, m)
		}
		if m, ok := num(schema["maximum"]); ok && f > m {
			return fmt.Errorf("%s: %v is above the maximum %v", at, f, m)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: want a boolean, got %T", at, v)
		}
	default:
		return fmt.Errorf("%s: schema type %q is not supported by the checker", at, typ)
	}
	return nil
}

func num(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// Transport checks every answer that goes through it against the spec and
// reports mismatches with t.Errorf. Event streams are passed through
// unchecked (check their events with CheckSchema).
type Transport struct {
	Base http.RoundTripper // nil: http.DefaultTransport
	Spec *Spec
	T    testing.TB

	mu   sync.Mutex
	seen map[string]bool
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		t.record(r.Method, r.URL.EscapedPath(), resp.StatusCode)
		if err := t.Spec.Check(r.Method, r.URL.EscapedPath(), resp.StatusCode, ct, nil); err != nil {
			t.T.Errorf("%v", err)
		}
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	t.record(r.Method, r.URL.EscapedPath(), resp.StatusCode)
	if err := t.Spec.Check(r.Method, r.URL.EscapedPath(), resp.StatusCode, ct, body); err != nil {
		t.T.Errorf("%v", err)
	}
	return resp, nil
}

func (t *Transport) record(method, path string, status int) {
	tpl, _ := t.Spec.match(path)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	t.seen[fmt.Sprintf("%s %s %d", method, tpl, status)] = true
}

// Seen lists "METHOD /template STATUS" of every answer checked.
func (t *Transport) Seen() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.seen))
	for k := range t.seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Operation is one documented method of a path and the statuses it may
// answer.
type Operation struct {
	Method string // upper case
	Path   string // the template, e.g. /v1/topics/{topic}/timers
	// Statuses are the documented response codes, ascending.
	Statuses []int
}

// Key is "METHOD /template STATUS", the form Transport.Seen lists.
func (o Operation) Key(status int) string {
	return fmt.Sprintf("%s %s %d", o.Method, o.Path, status)
}

// Operations lists every documented operation, by path then method.
func (s *Spec) Operations() []Operation {
	var out []Operation
	paths := s.doc["paths"].(map[string]any)
	for _, pt := range s.paths {
		item, _ := paths[pt.raw].(map[string]any)
		methods := make([]string, 0, len(item))
		for m := range item {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		for _, m := range methods {
			op, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			responses, ok := op["responses"].(map[string]any)
			if !ok {
				continue // "parameters" and other non-operation members
			}
			o := Operation{Method: strings.ToUpper(m), Path: pt.raw}
			for code := range responses {
				if n, err := strconv.Atoi(code); err == nil {
					o.Statuses = append(o.Statuses, n)
				}
			}
			sort.Ints(o.Statuses)
			out = append(out, o)
		}
	}
	return out
}

// Missing lists, as Operation.Key strings, the documented answers that
// are not in seen (Transport.Seen lists). A 405 is a property of a path:
// a 405 seen for any method of a path counts for every operation of that
// path that documents 405.
func (s *Spec) Missing(seen []string) []string {
	have := map[string]bool{}
	notAllowed := map[string]bool{} // paths that answered 405
	for _, k := range seen {
		have[k] = true
		if rest, ok := strings.CutSuffix(k, " 405"); ok {
			if _, path, ok := strings.Cut(rest, " "); ok {
				notAllowed[path] = true
			}
		}
	}
	var out []string
	for _, o := range s.Operations() {
		for _, st := range o.Statuses {
			if have[o.Key(st)] || st == http.StatusMethodNotAllowed && notAllowed[o.Path] {
				continue
			}
			out = append(out, o.Key(st))
		}
	}
	return out
}

// ErrorCodes returns the enum of components.schemas.ErrorCode: every
// error code the API documents.
func (s *Spec) ErrorCodes() ([]string, error) {
	v, err := s.resolve("#/components/schemas/ErrorCode/enum")
	if err != nil {
		return nil, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("openapi: ErrorCode.enum is not a list")
	}
	out := make([]string, 0, len(list))
	for _, c := range list {
		str, ok := c.(string)
		if !ok {
			return nil, fmt.Errorf("openapi: ErrorCode.enum holds %v, not a string", c)
		}
		out = append(out, str)
	}
	return out, nil
}
