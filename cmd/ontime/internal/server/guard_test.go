package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/cmd/ontime/internal/config"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/internal/wait"
	"github.com/ontime-go/ontime/internal/wire"
	"github.com/ontime-go/ontime/ontimedriver"
)

// storeState is what the store holds for the guard tests: topic t's timer x
// and its count, and topic t's dead letters.
type storeState struct {
	counts ontime.Counts
	timer  string // x's JSON, "" when absent
}

func snapshot(t *testing.T, e *env) storeState {
	t.Helper()
	c, err := e.client.Count(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	st := storeState{counts: c}
	if ti, err := e.client.Get(t.Context(), "t", "x"); err == nil {
		st.timer = fmt.Sprintf("%s %s %d %s", ti.Due, ti.State, ti.Attempt, ti.Body)
	}
	return st
}

// seedStore schedules timer x of topic t an hour ahead and makes one dead
// letter in topic t, so that a refused write could be seen: a cancel, a
// fire, a purge, a replay or a publish would change the snapshot.
func seedStore(t *testing.T, e *env, hdr ...string) storeState {
	t.Helper()
	e.want(e.do("POST", "/v1/topics/t/timers", `{"id":"x","body":"keep me","delay":"1h"}`, hdr...), 201, "")
	e.want(e.do("POST", "/v1/topics/t/timers", `{"id":"dead-1","body":"d","delay":"0s"}`, hdr...), 201, "")
	// Dead-letter it by hand: a claim and a Dead settlement.
	wait.For(t, 10*time.Second, func() bool {
		res, err := e.drv.Claim(t.Context(), "t", 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Timers {
			if c.ID == "dead-1" {
				if _, err := e.drv.Settle(t.Context(), "t", settleDead(c.ID, c.Token)); err != nil {
					t.Fatal(err)
				}
				return true
			}
		}
		return false
	}, "dead-1 due")
	st := snapshot(t, e)
	if st.counts.Dead != 1 || st.counts.Scheduled != 1 || st.timer == "" {
		t.Fatalf("seeded store: %+v", st)
	}
	return st
}

func settleDead(id, token string) []ontimedriver.Settlement {
	return []ontimedriver.Settlement{{Lease: ontimedriver.Lease{ID: id, Token: token}, Kind: ontimedriver.Dead, Reason: ontimedriver.ReasonRejected, Error: "test"}}
}

// TestHostCheck: a request whose Host does not name the server (a
// DNS-rebinding page's own name) is refused with 421 misdirected_host on
// every endpoint, before anything runs: the store is unchanged. The
// server's own address, the loopback names and allowed_hosts pass.
func TestHostCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	before := seedStore(t, e)
	_, port, _ := strings.Cut(e.addr, ":")
	for _, host := range []string{"rebind.example:" + port, "rebind.example", "127.0.0.1.nip.io:" + port, "localhost.evil.test:" + port, "10.1.2.3:" + port} {
		for _, o := range spec.Operations() {
			key := o.Method + " " + o.Path
			if key == "GET /v1/topics/{topic}/watch" && host != "rebind.example" {
				continue // a stream that would be refused all the same; once is enough
			}
			r := e.do(o.Method, concrete(o.Path), validBody[key], "Host", host)
			if r.status != http.StatusMisdirectedRequest || r.code() != "misdirected_host" {
				t.Errorf("%s with Host %q: %d %s, want 421 misdirected_host", key, host, r.status, r.body)
			}
		}
	}
	if got := snapshot(t, e); got != before {
		t.Errorf("the store changed under refused requests: %+v, was %+v", got, before)
	}
	for _, host := range []string{"127.0.0.1:" + port, "127.0.0.1", "localhost:" + port, "LOCALHOST:" + port, "localhost.:" + port, "app.localhost:" + port, "[::1]:" + port, "127.9.9.9"} {
		e.want(e.do("GET", "/v1/topics/t/timers/x", nil, "Host", host), 200, "")
	}

	// An HTTP/1.0 probe without Host (no browser sends one) passes.
	c := dialRaw(t, e)
	if err := c.write("GET /healthz HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := c.answer("GET /healthz"); resp.StatusCode != 200 {
		t.Errorf("HTTP/1.0 without Host: %d", resp.StatusCode)
	}

	t.Run("allowed_hosts", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{noWorkers: true, allowedHosts: []string{"ontime.example.com", "*.corp.test"}})
		for host, want := range map[string]int{
			"ontime.example.com": 404, "ONTIME.example.com:443": 404, "a.corp.test": 404, "a.b.corp.test:1": 404,
			"corp.test": 421, "example.com": 421, "evil-ontime.example.com": 421, "xcorp.test": 421,
		} {
			if r := e.do("GET", "/v1/topics/t/timers/x", nil, "Host", host); r.status != want {
				t.Errorf("Host %q: %d %s, want %d", host, r.status, r.body, want)
			}
		}
	})
	t.Run("any", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{noWorkers: true, allowedHosts: []string{"*"}})
		e.want(e.do("GET", "/v1/topics/t/timers/x", nil, "Host", "anything.example"), 404, "not_found")
	})
}

// TestCrossOrigin: what a browser sends from another origin (a
// text/plain form, a no-cors fetch: Sec-Fetch-Site cross-site or
// same-site, or an Origin that is not the Host) is refused with 403
// cross_origin on every write and on watch streams, and the store is
// unchanged; the same requests without those headers (curl) or from the
// server's own origin pass; reads pass.
func TestCrossOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	before := seedStore(t, e)
	foreign := [][]string{
		{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"},
		{"Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:1"}, // another loopback port
		{"Origin", "http://127.0.0.1:1"},                                // an old browser: Origin alone
		{"Origin", "null"},                                              // a sandboxed page
	}
	for _, o := range spec.Operations() {
		key := o.Method + " " + o.Path
		write := o.Method != "GET" || strings.HasSuffix(o.Path, "/watch")
		for _, h := range foreign {
			hdr := append([]string{"Content-Type", "text/plain"}, h...)
			if !write {
				if r := e.do(o.Method, concrete(o.Path), nil, hdr...); r.code() == "cross_origin" {
					t.Errorf("%s (a read) with %v: refused as cross_origin", key, h)
				}
				continue
			}
			r := e.do(o.Method, concrete(o.Path), validBody[key], hdr...)
			if r.status != 403 || r.code() != "cross_origin" {
				t.Errorf("%s with %v: %d %s, want 403 cross_origin", key, h, r.status, r.body)
			}
		}
	}
	// The attack of the issue: a text/plain form that purges every dead
	// letter, with duplicate keys.
	purge := `{"all":true,"ids":["="],"ids":null}`
	r := e.do("POST", "/v1/topics/t/dead:purge", purge, "Content-Type", "text/plain", "Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:1")
	e.want(r, 403, "cross_origin")
	if got := snapshot(t, e); got != before {
		t.Errorf("the store changed under cross-origin requests: %+v, was %+v", got, before)
	}
	// The same body from curl (no browser headers) is refused for its
	// duplicate key, and changes nothing either.
	e.want(e.do("POST", "/v1/topics/t/dead:purge", purge, "Content-Type", "application/x-www-form-urlencoded"), 400, "duplicate_field")
	if got := snapshot(t, e); got != before {
		t.Errorf("the store changed under a duplicate-key purge: %+v, was %+v", got, before)
	}
	// The server's own origin (the dashboard), a typed URL (none) and
	// curl's form content type work.
	_, port, _ := strings.Cut(e.addr, ":")
	e.want(e.do("POST", "/v1/topics/t/timers", `{"id":"a","delay":"1h"}`, "Sec-Fetch-Site", "same-origin", "Origin", "http://127.0.0.1:"+port), 201, "")
	e.want(e.do("POST", "/v1/topics/t/timers", `{"id":"b","delay":"1h"}`, "Origin", "http://"+e.addr), 201, "")
	e.want(e.do("POST", "/v1/topics/t/timers", `{"id":"c","delay":"1h"}`, "Sec-Fetch-Site", "none"), 201, "")
	e.want(e.do("POST", "/messages", `{"message": "hello in 5 seconds", "delay_sec": 5}`, "Content-Type", "application/x-www-form-urlencoded"), 201, "")
}

// TestStrictJSON: duplicate keys, keys in another letter case, invalid
// UTF-8 and lone surrogate escapes are refused on every endpoint that
// reads JSON, through the single-timer fast path and encoding/json alike,
// and nothing is stored.
func TestStrictJSON(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	cases := []struct{ path, body, code string }{
		// The single-timer endpoint: the fast path and encoding/json.
		{"/v1/topics/s/timers", `{"delay":"1s","delay":"1h"}`, "duplicate_field"},
		{"/v1/topics/s/timers", `{"delay":"1s","id":"a","id":"b"}`, "duplicate_field"},
		{"/v1/topics/s/timers", `{"DELAY":"1s"}`, "unknown_field"},
		{"/v1/topics/s/timers", `{"delay":"1s","Id":"a"}`, "unknown_field"},
		{"/v1/topics/s/timers", `{"delay":"1s","id":"a","ID":"b"}`, "unknown_field"},
		{"/v1/topics/s/timers", `{"delay":"1s","headers":{"a":"1","a":"2"}}`, "duplicate_field"},
		{"/v1/topics/s/timers", `{"delay":"1s","headers":{"tenant":"1","Tenant":"2"}}`, "invalid_header"},
		{"/v1/topics/s/timers", `{"delay":"1s","body":{"n":1,"n":2}}`, "duplicate_field"},
		{"/v1/topics/s/timers", `{"delay":"1s","body":{"a":{"k":1,"k":2}}}`, "duplicate_field"},
		{"/v1/topics/s/timers", `{"delay":"1s","id":"\ud800"}`, "malformed_json"},
		{"/v1/topics/s/timers", `{"delay":"1s","id":"a\udc00b"}`, "malformed_json"},
		{"/v1/topics/s/timers", `{"delay":"1s","id":"\ud800\u0041"}`, "malformed_json"},
		{"/v1/topics/s/timers", `{"delay":"1s","body":"x\udfff"}`, "malformed_json"},
		{"/v1/topics/s/timers", "{\"delay\":\"1s\",\"id\":\"\xed\xa0\x80\"}", "malformed_json"},
		{"/v1/topics/s/timers", "{\"delay\":\"1s\",\"body\":\"\xff\"}", "malformed_json"},
		// Batches, messages, dead-letter selections.
		{"/v1/topics/s/timers:batch", `[{"delay":"1s"},{"delay":"1s","delay":"2s"}]`, "duplicate_field"},
		{"/v1/topics/s/timers:batch", `[{"Delay":"1s"}]`, "unknown_field"},
		{"/v1/topics/s/timers:batch", `[{"delay":"1s","id":"\ud800"}]`, "malformed_json"},
		{"/messages", `{"message":"a","message":"b"}`, "duplicate_field"},
		{"/messages", `{"Message":"a"}`, "unknown_field"},
		{"/messages", `{"message":"\udbff"}`, "malformed_json"},
		{"/v1/topics/s/dead:purge", `{"all":true,"ids":["="],"ids":null}`, "duplicate_field"},
		{"/v1/topics/s/dead:purge", `{"ALL":true}`, "unknown_field"},
		{"/v1/topics/s/dead:replay", `{"ids":["a"],"Ids":null}`, "unknown_field"},
		{"/v1/topics/s/dead:replay", `{"ids":["\ud800"]}`, "malformed_json"},
	}
	for _, c := range cases {
		r := e.do("POST", c.path, c.body)
		if r.status != 400 || r.code() != c.code {
			t.Errorf("POST %s %s: %d %s, want 400 %s", c.path, c.body, r.status, r.body, c.code)
		}
	}
	if n, err := e.client.Count(t.Context(), "s"); err != nil || n != (ontime.Counts{}) {
		t.Errorf("count %+v, %v: refused requests stored timers", n, err)
	}
	// What stays allowed: a surrogate pair, the character itself, keys
	// that differ in case inside a free-form body.
	e.want(e.do("POST", "/v1/topics/s/timers", `{"id":"\ud83d\ude00","delay":"1h"}`), 201, "")
	e.want(e.do("POST", "/v1/topics/s/timers", `{"id":"😀2","delay":"1h","body":{"Name":1,"name":2}}`), 201, "")
	var tm wire.Timer
	e.do("GET", "/v1/topics/s/timers/%F0%9F%98%80", nil).json(t, &tm)
	if tm.ID != "😀" {
		t.Errorf("the surrogate pair's id is %q", tm.ID)
	}
	// A lone surrogate in a path (its UTF-8 form, CESU-8) is refused too.
	e.want(e.do("GET", "/v1/topics/s/timers/%ED%A0%80", nil), 400, "invalid_id")
	e.want(e.do("DELETE", "/v1/topics/s/timers/a%ED%B0%80", nil), 400, "invalid_id")
	e.want(e.do("POST", "/v1/topics/s/timers/%ED%A0%80/fire", nil), 400, "invalid_id")
}

// TestInstantsBefore1970: an instant before 1970, year 1 included (Go's
// zero time, which the library reads as "no instant"), and one after year
// 9999 are refused everywhere the API takes an instant: at, before,
// start.
func TestInstantsBefore1970(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true})
	for _, at := range []string{"0001-01-01T00:00:00Z", "1969-12-31T23:59:59.999Z", "0000-01-01T00:00:00Z", "1970-01-01T00:00:00+00:01", "10000-01-01T00:00:00Z"} {
		e.want(e.do("POST", "/v1/topics/i/timers", `{"id":"a","at":"`+at+`"}`), 400, "invalid_at")
		e.want(e.do("POST", "/v1/topics/i/timers:batch", `[{"id":"a","at":"`+at+`"}]`), 400, "invalid_at")
		e.want(e.do("GET", "/v1/topics/i/timers?before="+at, nil), 400, "invalid_query")
		e.want(e.do("GET", "/v1/topics/i/dead?before="+at, nil), 400, "invalid_query")
		e.want(e.do("GET", "/v1/topics/i/timeline?start="+at, nil), 400, "invalid_query")
	}
	if n, err := e.client.Count(t.Context(), "i"); err != nil || n != (ontime.Counts{}) {
		t.Errorf("count %+v, %v: refused instants stored timers", n, err)
	}
	e.want(e.do("POST", "/v1/topics/i/timers", `{"id":"epoch","at":"1970-01-01T00:00:00Z"}`), 201, "")
}

// placements are ways of sending a valid admin token that are not a
// bearer token in Authorization: each is anonymous, so 401.
var placements = [][]string{
	{},
	{"Authorization", "Basic YWRtaW46YWRtaW4="},
	{"Authorization", "Token admin-tok"},
	{"Authorization", "admin-tok"},
	{"Authorization", "Bearer"},
	{"Authorization", "Bearer admin-tok2"},
	{"Authorization", "Bearer ADMIN-TOK"},
	{"Authorization", "Bearer admin-to"},
	{"Authorization", "Bearer:admin-tok"},
	{"Authorization", "Bearer" + "admin-tok"},
	{"Cookie", "token=admin-tok"},
	{"X-Api-Key", "admin-tok"},
	{"X-Auth-Token", "admin-tok"},
	{"Proxy-Authorization", "Bearer admin-tok"},
	{"Authorization", "Bearer read-tok,admin-tok"},
	{"Authorization", "Bearer  "},
}

// TestAuthEveryOperation: with tokens on, every documented operation that
// documents 401 answers it to an anonymous caller and to every wrong
// placement of a valid token (query, cookie, other schemes...); only
// /healthz and /readyz do not document it. Each role's token gets exactly
// its operations: read the GETs and watch, write also publish, cancel and
// fire, admin also replay and purge; a lower role gets 403 forbidden, and
// a legacy token (tokens = [...]) is admin. Refused requests change
// nothing in the store.
func TestAuthEveryOperation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{cfg: &config.Config{ServeTopics: []string{"w"}}, tokens: []string{"legacy-tok"}, roleTokens: []server.Token{
		{Secret: "read-tok", Role: server.RoleRead}, {Secret: "write-tok", Role: server.RoleWrite}, {Secret: "admin-tok", Role: server.RoleAdmin},
	}})
	before := seedStore(t, e, "Authorization", "Bearer admin-tok")
	roles := server.New(server.Options{Client: e.client}).RouteRoles()
	var open []string
	for _, o := range spec.Operations() {
		key := o.Method + " " + o.Path
		if !slices.Contains(o.Statuses, http.StatusUnauthorized) {
			open = append(open, key)
			continue
		}
		for _, p := range placements {
			path := concrete(o.Path)
			if len(p) == 0 {
				path += "?access_token=admin-tok&token=admin-tok"
			}
			r := e.do(o.Method, path, validBody[key], p...)
			if r.status != 401 || r.code() != "unauthorized" {
				t.Errorf("%s with %q: %d %s, want 401 unauthorized", key, p, r.status, r.body)
			}
		}
		// The rule the roles follow, stated here, against the server's
		// table.
		want := server.RoleRead
		switch {
		case strings.HasSuffix(o.Path, ":replay"), strings.HasSuffix(o.Path, ":purge"):
			want = server.RoleAdmin
		case strings.HasSuffix(o.Path, "/watch:ack"):
			// Confirming a watch stream's events is part of watching.
			want = server.RoleRead
		case o.Method != "GET":
			want = server.RoleWrite
		}
		if roles[key] != want {
			t.Errorf("%s needs %s, want %s", key, roles[key], want)
		}
	}
	if !slices.Equal(open, []string{"GET /healthz", "GET /readyz"}) {
		t.Errorf("operations without auth: %v, want only the health checks", open)
	}
	if got := snapshot(t, e); got != before {
		t.Errorf("the store changed under unauthenticated requests: %+v, was %+v", got, before)
	}
	// Each role on each operation that would change the store, with a
	// body that would change it: below the role, 403 and no change.
	for _, tok := range []struct {
		secret string
		role   server.Role
	}{{"read-tok", server.RoleRead}, {"write-tok", server.RoleWrite}} {
		for _, o := range spec.Operations() {
			key := o.Method + " " + o.Path
			need, ok := roles[key]
			if !ok || need <= tok.role {
				continue
			}
			r := e.do(o.Method, concrete(o.Path), validBody[key], "Authorization", "Bearer "+tok.secret)
			if r.status != 403 || r.code() != "forbidden" {
				t.Errorf("%s with a %s token: %d %s, want 403 forbidden", key, tok.role, r.status, r.body)
			}
		}
	}
	if got := snapshot(t, e); got != before {
		t.Errorf("the store changed under forbidden requests: %+v, was %+v", got, before)
	}
	// And what each may do.
	ok := func(r *response, what string) {
		t.Helper()
		if r.status == 401 || r.status == 403 {
			t.Errorf("%s: %d %s", what, r.status, r.body)
		}
	}
	for _, tok := range []string{"read-tok", "write-tok", "admin-tok", "legacy-tok"} {
		auth := []string{"Authorization", "Bearer " + tok}
		for _, p := range []string{"/v1/topics", "/v1/stats", "/v1/topics/t/timers", "/v1/topics/t/timers/x", "/v1/topics/t/dead", "/v1/topics/t/dead/x", "/v1/topics/t/timeline", "/v1/openapi.json", "/nowhere"} {
			ok(e.do("GET", p, nil, auth...), tok+" GET "+p)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/topics/w/watch", nil)
		req.Header.Set("Authorization", auth[1])
		resp, err := e.hc.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s watch: %v %v", tok, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		cancel()
	}
	for _, tok := range []string{"write-tok", "admin-tok", "legacy-tok"} {
		auth := []string{"Authorization", "Bearer " + tok}
		ok(e.do("POST", "/v1/topics/w/timers", `{"id":"`+tok+`","delay":"1h"}`, auth...), tok+" publish")
		ok(e.do("POST", "/v1/topics/w/timers/"+tok+"/fire", nil, auth...), tok+" fire")
		ok(e.do("DELETE", "/v1/topics/w/timers/"+tok, nil, auth...), tok+" cancel")
		ok(e.do("POST", "/messages", `{"message":"m","delay_sec":3600}`, auth...), tok+" message")
	}
	for _, tok := range []string{"admin-tok", "legacy-tok"} {
		auth := []string{"Authorization", "Bearer " + tok}
		ok(e.do("POST", "/v1/topics/w/dead:replay", `{"all":true}`, auth...), tok+" replay")
		ok(e.do("POST", "/v1/topics/w/dead:purge", `{"ids":["nope"]}`, auth...), tok+" purge")
	}
	e.want(e.do("GET", "/healthz", nil), 200, "")
	e.want(e.do("GET", "/readyz", nil, "Authorization", "Bearer wrong"), 200, "")
}

// TestReadyzDetails: with the store down an anonymous caller, a wrong
// token and a read token get 503 {"status":"unavailable"} and a request
// id; an admin token also gets the store's error.
func TestReadyzDetails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noWorkers: true, roleTokens: []server.Token{{Secret: "r", Role: server.RoleRead}, {Secret: "a", Role: server.RoleAdmin}}})
	if err := e.drv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer r", "Bearer a"} {
		var hdr []string
		if auth != "" {
			hdr = []string{"Authorization", auth}
		}
		r := e.do("GET", "/readyz", nil, hdr...)
		var st wire.Status
		r.json(t, &st)
		wantErr := auth == "Bearer a"
		if r.status != 503 || st.Status != "unavailable" || st.RequestID == "" || (st.Error != "") != wantErr || wantErr && !strings.Contains(st.Error, "closed") {
			t.Errorf("readyz with %q: %d %s; want 503 unavailable with a request id, the store's error only for admin", auth, r.status, r.body)
		}
	}
}
