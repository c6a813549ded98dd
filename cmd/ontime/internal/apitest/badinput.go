package apitest

import (
	"encoding/base64"
	"strings"
)

// BadInput is a request the API must refuse with Status and error Code,
// storing nothing.
type BadInput struct {
	Name         string
	Method, Path string
	Body         string // sent as is; "" with a nil-body method sends none
	Status       int
	Code         string
}

// BadInputs lists every kind of bad request of the API, for a server whose
// body limit (max_body_bytes) is maxBody. The same table runs in-process
// (package server) and against the real binary (the e2e tests).
func BadInputs(maxBody int) []BadInput {
	big := strings.Repeat("x", maxBody+1)
	huge := strings.Repeat("y", 2*maxBody+128<<10) // over the request cap
	return []BadInput{
		{"malformed", "POST", "/v1/topics/t/timers", `{"delay":`, 400, "malformed_json"},
		{"not json", "POST", "/v1/topics/t/timers", `hello`, 400, "malformed_json"},
		{"empty body", "POST", "/v1/topics/t/timers", ``, 400, "malformed_json"},
		{"array not object", "POST", "/v1/topics/t/timers", `[1]`, 400, "malformed_json"},
		{"trailing data", "POST", "/v1/topics/t/timers", `{"delay":"1s"} {}`, 400, "malformed_json"},
		{"unknown field", "POST", "/v1/topics/t/timers", `{"delay":"1s","dealy":"2s"}`, 400, "unknown_field"},
		{"wrong type", "POST", "/v1/topics/t/timers", `{"delay":5}`, 400, "invalid_field"},
		{"both delay and at", "POST", "/v1/topics/t/timers", `{"delay":"1s","at":"2030-01-01T00:00:00Z"}`, 400, "delay_and_at"},
		{"neither delay nor at", "POST", "/v1/topics/t/timers", `{"body":"x"}`, 400, "missing_due"},
		{"negative delay", "POST", "/v1/topics/t/timers", `{"delay":"-5s"}`, 400, "invalid_delay"},
		{"unparsable delay", "POST", "/v1/topics/t/timers", `{"delay":"5 parsecs"}`, 400, "invalid_delay"},
		{"delay without unit", "POST", "/v1/topics/t/timers", `{"delay":"90"}`, 400, "invalid_delay"},
		{"at without zone", "POST", "/v1/topics/t/timers", `{"at":"2030-01-01T10:00:00"}`, 400, "invalid_at"},
		{"at garbage", "POST", "/v1/topics/t/timers", `{"at":"tomorrow"}`, 400, "invalid_at"},
		{"empty topic", "POST", "/v1/topics//timers", `{"delay":"1s"}`, 400, "invalid_topic"},
		{"topic with space", "POST", "/v1/topics/a%20b/timers", `{"delay":"1s"}`, 400, "invalid_topic"},
		{"dot topic", "POST", "/v1/topics/./timers", `{"delay":"1s"}`, 400, "invalid_topic"},
		{"dot-dot topic", "GET", "/v1/topics/../timers", "", 400, "invalid_topic"},
		{"escaped dot-dot topic", "GET", "/v1/topics/%2E%2E/dead", "", 400, "invalid_topic"},
		{"dot id in path", "GET", "/v1/topics/t/timers/.", "", 400, "invalid_id"},
		{"dot-dot id in path", "DELETE", "/v1/topics/t/timers/..", "", 400, "invalid_id"},
		{"escaped dot id in path", "GET", "/v1/topics/t/timers/%2e", "", 400, "invalid_id"},
		{"dot id in body", "POST", "/v1/topics/t/timers", `{"id":".","delay":"1s"}`, 400, "invalid_id"},
		{"dot-dot id in batch", "POST", "/v1/topics/t/timers:batch", `[{"id":"..","delay":"1s"}]`, 400, "invalid_id"},
		{"dot id in replay", "POST", "/v1/topics/t/dead:replay", `{"ids":["."]}`, 400, "invalid_id"},
		{"reserved header, other case", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"Content-Type":"text/html"}}`, 400, "invalid_header"},
		{"reserved header, upper case", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"CORRELATION_ID":"x"}}`, 400, "invalid_header"},
		{"empty cursor", "GET", "/v1/topics/t/timers?cursor=", "", 400, "invalid_query"},
		{"malformed cursor", "GET", "/v1/topics/t/timers?cursor=not-a-cursor", "", 400, "invalid_query"},
		{"two cursors", "GET", "/v1/topics/t/timers?cursor=a&cursor=b", "", 400, "invalid_query"},
		{"malformed dead cursor", "GET", "/v1/topics/t/dead?cursor=%21%21", "", 400, "invalid_query"},
		{"empty limit", "GET", "/v1/topics/t/dead?limit=", "", 400, "invalid_query"},
		{"topic with brace", "POST", "/v1/topics/a%7Bb%7D/timers", `{"delay":"1s"}`, 400, "invalid_topic"},
		{"topic with hash", "POST", "/v1/topics/a%23b/timers", `{"delay":"1s"}`, 400, "invalid_topic"},
		{"topic not ascii", "POST", "/v1/topics/caf%C3%A9/timers", `{"delay":"1s"}`, 400, "invalid_topic"},
		{"topic too long", "POST", "/v1/topics/" + strings.Repeat("t", 201) + "/timers", `{"delay":"1s"}`, 400, "invalid_topic"},
		{"id with control char", "POST", "/v1/topics/t/timers", `{"delay":"1s","id":"a\u0001b"}`, 400, "invalid_id"},
		{"id too long", "POST", "/v1/topics/t/timers", `{"delay":"1s","id":"` + strings.Repeat("i", 201) + `"}`, 400, "invalid_id"},
		{"body and base64", "POST", "/v1/topics/t/timers", `{"delay":"1s","body":"a","body_base64":"YQ=="}`, 400, "invalid_body"},
		{"bad base64", "POST", "/v1/topics/t/timers", `{"delay":"1s","body_base64":"!!!"}`, 400, "invalid_body"},
		{"body too large", "POST", "/v1/topics/t/timers", `{"delay":"1s","body":"` + big + `"}`, 413, "body_too_large"},
		{"json body too large", "POST", "/v1/topics/t/timers", `{"delay":"1s","body":["` + big + `"]}`, 413, "body_too_large"},
		{"base64 body too large", "POST", "/v1/topics/t/timers", `{"delay":"1s","body_base64":"` + base64.StdEncoding.EncodeToString([]byte(big)) + `"}`, 413, "body_too_large"},
		{"request too large", "POST", "/v1/topics/t/timers", `{"delay":"1s","body":"` + huge + `"}`, 413, "request_too_large"},
		{"reserved header", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"correlation_id":"x"}}`, 400, "invalid_header"},
		{"empty header name", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"":"x"}}`, 400, "invalid_header"},
		{"header name not a token", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"a b":"x"}}`, 400, "invalid_header"},
		{"header name with colon", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"x:y":"x"}}`, 400, "invalid_header"},
		{"header name not ascii", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"caf\u00e9":"x"}}`, 400, "invalid_header"},
		{"header value with CRLF", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"k":"a\r\nInjected: 1"}}`, 400, "invalid_header"},
		{"header value with NUL", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"k":"a\u0000b"}}`, 400, "invalid_header"},
		{"header value with DEL", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"k":"a\u007fb"}}`, 400, "invalid_header"},
		{"header not a string", "POST", "/v1/topics/t/timers", `{"delay":"1s","headers":{"a":1}}`, 400, "invalid_field"},
		{"bad correlation id", "POST", "/v1/topics/t/timers", `{"delay":"1s","correlation_id":"a\u0007"}`, 400, "invalid_correlation_id"},
		{"empty batch", "POST", "/v1/topics/t/timers:batch", `[]`, 400, "invalid_batch"},
		{"batch not an array", "POST", "/v1/topics/t/timers:batch", `{"delay":"1s"}`, 400, "malformed_json"},
		{"batch with a bad item", "POST", "/v1/topics/t/timers:batch", `[{"delay":"1s","id":"ok"},{"delay":"-1s"}]`, 400, "invalid_delay"},
		{"batch too big", "POST", "/v1/topics/t/timers:batch", "[" + strings.TrimSuffix(strings.Repeat(`{"delay":"1s"},`, 501), ",") + "]", 400, "batch_too_large"},
		{"batch mixing if_absent", "POST", "/v1/topics/t/timers:batch", `[{"delay":"1s"},{"delay":"1s","if_absent":true}]`, 400, "invalid_batch"},
		{"messages without message", "POST", "/messages", `{"delay_sec":1}`, 400, "invalid_message"},
		{"messages negative delay", "POST", "/messages", `{"message":"x","delay_sec":-1}`, 400, "invalid_delay"},
		{"messages string delay", "POST", "/messages", `{"message":"x","delay_sec":"5"}`, 400, "invalid_field"},
		{"messages unknown field", "POST", "/messages", `{"message":"x","delay":"5s"}`, 400, "unknown_field"},
		{"messages too large", "POST", "/messages", `{"message":"` + big + `"}`, 413, "body_too_large"},
		{"list bad limit", "GET", "/v1/topics/t/timers?limit=0", "", 400, "invalid_query"},
		{"list bad before", "GET", "/v1/topics/t/timers?before=soon", "", 400, "invalid_query"},
		{"list bad cursor", "GET", "/v1/topics/t/timers?cursor=%21%21", "", 400, "invalid_query"},
		{"get missing", "GET", "/v1/topics/t/timers/nope", "", 404, "not_found"},
		{"get empty id", "GET", "/v1/topics/t/timers/", "", 400, "invalid_id"},
		{"delete missing", "DELETE", "/v1/topics/t/timers/nope", "", 404, "not_found"},
		{"delete empty id", "DELETE", "/v1/topics/t/timers/", "", 400, "invalid_id"},
		{"delete bad topic", "DELETE", "/v1/topics/a%20b/timers/x", "", 400, "invalid_topic"},
		{"wrong method", "PUT", "/v1/topics/t/timers", `{"delay":"1s"}`, 405, "method_not_allowed"},
		{"wrong method on a batch", "GET", "/v1/topics/t/timers:batch", "", 405, "method_not_allowed"},
		{"wrong method on a timer", "POST", "/v1/topics/t/timers/x", `{"delay":"1s"}`, 405, "method_not_allowed"},
		{"wrong method on topics", "POST", "/v1/topics", `{}`, 405, "method_not_allowed"},
		{"wrong method on a topic", "DELETE", "/v1/topics/t", "", 405, "method_not_allowed"},
		{"wrong method on watch", "POST", "/v1/topics/t/watch", `{}`, 405, "method_not_allowed"},
		{"wrong method on dead", "DELETE", "/v1/topics/t/dead", "", 405, "method_not_allowed"},
		{"wrong method on replay", "GET", "/v1/topics/t/dead:replay", "", 405, "method_not_allowed"},
		{"wrong method on purge", "GET", "/v1/topics/t/dead:purge", "", 405, "method_not_allowed"},
		{"wrong method on stats", "DELETE", "/v1/stats", "", 405, "method_not_allowed"},
		{"wrong method on messages", "GET", "/messages", "", 405, "method_not_allowed"},
		{"no such endpoint", "GET", "/v2/nothing", "", 404, "no_route"},
		{"dead bad limit", "GET", "/v1/topics/t/dead?limit=5000", "", 400, "invalid_query"},
		{"dead bad topic", "GET", "/v1/topics/a%20b/dead", "", 400, "invalid_topic"},
		{"replay bad id", "POST", "/v1/topics/t/dead:replay", `{"ids":[""]}`, 400, "invalid_id"},
		{"replay not json", "POST", "/v1/topics/t/dead:replay", `{"ids":`, 400, "malformed_json"},
		{"purge bad id", "POST", "/v1/topics/t/dead:purge", `{"ids":["a\u0000"]}`, 400, "invalid_id"},
		{"purge unknown field", "POST", "/v1/topics/t/dead:purge", `{"id":["a"]}`, 400, "unknown_field"},
		{"purge no body", "POST", "/v1/topics/t/dead:purge", "", 400, "missing_ids"},
		{"purge empty ids", "POST", "/v1/topics/t/dead:purge", `{"ids":[]}`, 400, "missing_ids"},
		{"purge null ids", "POST", "/v1/topics/t/dead:purge", `{"ids":null}`, 400, "missing_ids"},
		{"replay no body", "POST", "/v1/topics/t/dead:replay", "", 400, "missing_ids"},
		{"replay empty object", "POST", "/v1/topics/t/dead:replay", `{}`, 400, "missing_ids"},
		{"replay ids and all", "POST", "/v1/topics/t/dead:replay", `{"ids":["a"],"all":true}`, 400, "ids_and_all"},
		{"watch bad topic", "GET", "/v1/topics/a%20b/watch", "", 400, "invalid_topic"},
	}
}
