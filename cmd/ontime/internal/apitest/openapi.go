// Package apitest checks the API's requests and answers against its
// OpenAPI document, for tests, with kin-openapi: openapi3 loads the
// document and validates it as OpenAPI 3, and openapi3filter validates
// every request and answer that goes through a [Transport] against it.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Spec is a loaded, valid OpenAPI document.
type Spec struct {
	doc    *openapi3.T
	router routers.Router
}

// Load parses an OpenAPI document and validates it (a document kin-openapi
// finds invalid is an error).
func Load(data []byte) (*Spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("openapi: the document is not valid: %w", err)
	}
	// Route by path alone: the tests' servers listen on any loopback
	// port, not on the document's example server.
	routed := *doc
	routed.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(&routed)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return &Spec{doc: doc, router: router}, nil
}

// validation are the options of every check: the API's bearer tokens are
// the server's business (its own tests check them), and answers must have
// a documented status.
func validation() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            false,
	}
}

// Exchange is one request and its answer.
type Exchange struct {
	Request     *http.Request // its Body is not read; RequestBody is
	RequestBody []byte
	Status      int
	Header      http.Header
	// Body is nil for an event stream, which is not read (check its
	// events with CheckSchema).
	Body []byte
}

// Check validates one exchange and returns the path template it matched
// ("" for none):
//   - an undocumented path must answer 404, and an undocumented method of
//     a documented path 405, each with the Error schema;
//   - a request the document refuses (parameters, body) must not be
//     accepted: the answer must not be a 2xx (the server must refuse at
//     least what the document refuses);
//   - the answer's status must be documented for the operation, with its
//     content type, and a JSON body must match the documented schema; an
//     answer documented without content must have no body.
func (s *Spec) Check(ctx context.Context, x Exchange) (string, error) {
	req := x.Request.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	method, path := req.Method, req.URL.EscapedPath()
	route, params, err := s.router.FindRoute(req)
	if errors.Is(err, routers.ErrPathNotFound) {
		if empty := s.withEmptyParams(req); empty != nil {
			// A documented path with an empty parameter ("/v1/topics//timers",
			// "…/timers/"), which routing cannot match: the server
			// refuses it as that operation's bad input.
			route, params, err = empty, map[string]string{}, nil
			if x.Status != http.StatusBadRequest {
				return route.Path, fmt.Errorf("openapi: %s %s (%s) answered %d to an empty path parameter, want 400", method, route.Path, path, x.Status)
			}
		}
	}
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		if x.Status != http.StatusNotFound {
			return "", fmt.Errorf("openapi: %s %s answered %d: the path is not documented", method, path, x.Status)
		}
		if err := s.CheckSchema("Error", x.Body); err != nil {
			return "", fmt.Errorf("openapi: %s %s 404: %w", method, path, err)
		}
		return "", nil
	case errors.Is(err, routers.ErrMethodNotAllowed):
		tpl := s.template(path)
		if x.Status != http.StatusMethodNotAllowed {
			return tpl, fmt.Errorf("openapi: %s %s answered %d: the method is not documented", method, tpl, x.Status)
		}
		if err := s.CheckSchema("Error", x.Body); err != nil {
			return tpl, fmt.Errorf("openapi: %s %s 405: %w", method, tpl, err)
		}
		return tpl, nil
	case err != nil:
		return "", fmt.Errorf("openapi: %s %s: %w", method, path, err)
	}
	tpl := route.Path
	// The router matches the escaped path (so that %2F stays inside its
	// segment) and gives the parameters escaped; the server decodes them.
	for k, v := range params {
		if u, err := url.PathUnescape(v); err == nil {
			params[k] = u
		}
	}
	if len(x.RequestBody) > 0 {
		// The server reads every request body as JSON whatever its
		// Content-Type (curl -d sends application/x-www-form-urlencoded;
		// docs/api.md says so), and the document describes that JSON.
		req.Header.Set("Content-Type", "application/json")
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: validation()}
	if rerr := openapi3filter.ValidateRequest(ctx, in); rerr != nil && x.Status >= 200 && x.Status < 300 {
		return tpl, fmt.Errorf("openapi: %s %s answered %d to a request the document refuses: %w", method, tpl, x.Status, rerr)
	}
	stream := x.Body == nil && strings.HasPrefix(x.Header.Get("Content-Type"), "text/event-stream")
	opts := validation()
	opts.ExcludeResponseBody = stream
	err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 x.Status,
		Header:                 x.Header,
		Body:                   io.NopCloser(bytes.NewReader(x.Body)),
		Options:                opts,
	})
	if err != nil {
		return tpl, fmt.Errorf("openapi: %s %s %d: %w", method, tpl, x.Status, err)
	}
	if resp := route.Operation.Responses.Status(x.Status); resp == nil || resp.Value == nil || len(resp.Value.Content) == 0 {
		if len(bytes.TrimSpace(x.Body)) > 0 {
			return tpl, fmt.Errorf("openapi: %s %s %d documents no body but got %q", method, tpl, x.Status, x.Body)
		}
	} else if stream {
		mt, _, _ := mime.ParseMediaType(x.Header.Get("Content-Type"))
		if resp.Value.Content.Get(mt) == nil {
			return tpl, fmt.Errorf("openapi: %s %s %d: content type %q is not documented", method, tpl, x.Status, mt)
		}
	}
	return tpl, nil
}

// withEmptyParams returns the route req's path matches when its empty
// segments are taken as path parameters given empty, or nil.
func (s *Spec) withEmptyParams(req *http.Request) *routers.Route {
	segs := strings.Split(req.URL.EscapedPath(), "/")
	filled := false
	for i := 1; i < len(segs); i++ {
		if segs[i] == "" {
			segs[i], filled = "_", true
		}
	}
	if !filled {
		return nil
	}
	r := req.Clone(req.Context())
	r.URL.RawPath = ""
	r.URL.Path = strings.Join(segs, "/")
	route, _, err := s.router.FindRoute(r)
	if err != nil || !slices.ContainsFunc(strings.Split(route.Path, "/"), func(seg string) bool { return strings.HasPrefix(seg, "{") }) {
		return nil
	}
	return route
}

// template returns the documented path template an escaped path matches
// with any method, or "".
func (s *Spec) template(escapedPath string) string {
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"} {
		req, err := http.NewRequest(m, "http://localhost"+escapedPath, nil)
		if err != nil {
			return ""
		}
		if route, _, err := s.router.FindRoute(req); err == nil {
			return route.Path
		}
	}
	return ""
}

// CheckSchema validates JSON data against components.schemas[name].
func (s *Spec) CheckSchema(name string, data []byte) error {
	ref := s.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("openapi: no schema %q", name)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("openapi: %s: not JSON: %w", name, err)
	}
	if err := ref.Value.VisitJSON(v); err != nil {
		return fmt.Errorf("openapi: %s: %w", name, err)
	}
	return nil
}

// Transport checks every exchange that goes through it against the spec
// (Spec.Check) and reports mismatches with T.Errorf. Event streams are
// passed through with their status and content type checked (check their
// events with CheckSchema).
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
	var reqBody []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		if reqBody, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		r = r.Clone(r.Context())
		// The same bytes, framed the same way (a known length stays
		// known, an unknown one stays chunked).
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	x := Exchange{Request: r, RequestBody: reqBody, Status: resp.StatusCode, Header: resp.Header}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		x.Body = body
		if x.Body == nil {
			x.Body = []byte{}
		}
	}
	tpl, err := t.Spec.Check(context.Background(), x)
	if err != nil {
		t.T.Errorf("%v", err)
	}
	t.record(r.Method, tpl, resp.StatusCode)
	return resp, nil
}

func (t *Transport) record(method, tpl string, status int) {
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
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for p := range s.doc.Paths.Map() {
			if !yield(p) {
				return
			}
		}
	}) {
		ops := s.doc.Paths.Value(path).Operations()
		methods := make([]string, 0, len(ops))
		for m := range ops {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		for _, m := range methods {
			o := Operation{Method: strings.ToUpper(m), Path: path}
			for code := range ops[m].Responses.Map() {
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
	ref := s.doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		return nil, errors.New("openapi: no ErrorCode schema")
	}
	out := make([]string, 0, len(ref.Value.Enum))
	for _, c := range ref.Value.Enum {
		str, ok := c.(string)
		if !ok {
			return nil, fmt.Errorf("openapi: ErrorCode.enum holds %v, not a string", c)
		}
		out = append(out, str)
	}
	return out, nil
}
