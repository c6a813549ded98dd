package apitest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
	"github.com/ontime-go/ontime/internal/server"
)

// TestCheck: the checker (kin-openapi) finds each kind of mismatch between
// an exchange and the API's document, and passes the right ones.
func TestCheck(t *testing.T) {
	t.Parallel()
	spec, err := apitest.Load(server.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	const created = `{"id":"a","topic":"t","due_at":"2030-01-02T03:04:05Z"}`
	const errBody = `{"error":{"code":"invalid_field","message":"no"}}`
	cases := []struct {
		name, method, path, reqBody string
		status                      int
		body                        string
		want                        string // "" passes; else a part of the error
	}{
		{"valid", "POST", "/v1/topics/t/timers", `{"delay":"1s"}`, 201, created, ""},
		{"undocumented field", "POST", "/v1/topics/t/timers", `{"delay":"1s"}`, 201, `{"id":"a","topic":"t","due_at":"2030-01-02T03:04:05Z","x":1}`, `"x"`},
		{"missing field", "POST", "/v1/topics/t/timers", `{"delay":"1s"}`, 201, `{"id":"a","topic":"t"}`, "due_at"},
		{"not a date-time", "POST", "/v1/topics/t/timers", `{"delay":"1s"}`, 201, `{"id":"a","topic":"t","due_at":"tomorrow"}`, "date-time"},
		{"wrong type", "POST", "/v1/topics/t/timers", `{"delay":"1s"}`, 201, `{"id":1,"topic":"t","due_at":"2030-01-02T03:04:05Z"}`, "string"},
		{"undocumented status", "POST", "/v1/topics/t/timers", `{"delay":"1s"}`, 418, errBody, "418"},
		{"refused request accepted", "POST", "/v1/topics/t/timers", `{"delay":"1s","nope":true}`, 201, created, "refuses"},
		{"refused request refused", "POST", "/v1/topics/t/timers", `{"delay":"1s","nope":true}`, 400, errBody, ""},
		{"bad query accepted", "GET", "/v1/topics/t/timeline?buckets=5000", "", 200, `{}`, "refuses"},
		{"undocumented path", "GET", "/v2/nothing", "", 200, `{}`, "not documented"},
		{"undocumented path 404", "GET", "/v2/nothing", "", 404, errBody, ""},
		{"undocumented method", "PATCH", "/v1/topics/t/timers", "", 200, `{}`, "method"},
		{"undocumented method 405", "PATCH", "/v1/topics/t/timers", "", 405, errBody, ""},
		{"empty parameter refused", "GET", "/v1/topics/t/timers/", "", 400, errBody, ""},
		{"empty parameter accepted", "GET", "/v1/topics/t/timers/", "", 200, `{}`, "want 400"},
		{"escaped parameter", "GET", "/v1/topics/a%2Fb/timers", "", 200, `{"timers":[],"next_cursor":""}`, ""},
		{"error shape", "POST", "/v1/topics/t/timers", `{"delay":"1s"}`, 400, `{"error":"no"}`, "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequest(c.method, "http://127.0.0.1:1"+c.path, strings.NewReader(c.reqBody))
			if err != nil {
				t.Fatal(err)
			}
			if c.reqBody != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			hdr := http.Header{"Content-Type": {"application/json"}}
			_, err = spec.Check(context.Background(), apitest.Exchange{Request: req, RequestBody: []byte(c.reqBody), Status: c.status, Header: hdr, Body: []byte(c.body)})
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("want an error about %q, got %v", c.want, err)
			}
		})
	}
}

// TestLoadRefusesAnInvalidDocument: the document itself is validated.
func TestLoadRefusesAnInvalidDocument(t *testing.T) {
	t.Parallel()
	bad := strings.Replace(string(server.OpenAPI), `"$ref": "#/components/schemas/Created"`, `"$ref": "#/components/schemas/Nope"`, 1)
	if _, err := apitest.Load([]byte(bad)); err == nil {
		t.Fatal("a document with a dangling $ref loaded")
	}
}
