package server_test

import (
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ontime-go/ontime/cmd/ontime/internal/apitest"
)

// Every env's transport adds the answers it checked here when its test
// ends; TestMain then checks that every documented operation and status
// was answered at least once (checkCoverage).
var (
	seenMu  sync.Mutex
	seenAll = map[string]bool{}
)

func recordSeen(tr *apitest.Transport) {
	seenMu.Lock()
	defer seenMu.Unlock()
	for _, k := range tr.Seen() {
		seenAll[k] = true
	}
}

// recordRaw adds an answer a test read off a raw connection (not through
// an apitest.Transport): "METHOD /path/template STATUS".
func recordRaw(key string) {
	seenMu.Lock()
	defer seenMu.Unlock()
	seenAll[key] = true
}

// notProducible are documented answers no test here provokes, each with
// the reason. Nothing else may be missing.
var notProducible = map[string]string{}

func init() {
	// Every API operation documents 500 "internal": only a handler panic
	// (recovered by ServeHTTP) or an answer that does not encode produces
	// it, and no request can cause either without planting a bug. Watch's
	// other 500, a topic whose worker cannot start, cannot happen either:
	// the dispatcher builds every configured target at start and refuses
	// to start when one fails.
	const bug = "500 internal: only a bug (a handler panic) produces it"
	for _, k := range []string{
		"POST /v1/topics/{topic}/timers 500",
		"GET /v1/topics/{topic}/timers 500",
		"POST /v1/topics/{topic}/timers:batch 500",
		"POST /v1/topics/{topic}/timers:cancel 500",
		"GET /v1/topics/{topic}/timers/{id} 500",
		"DELETE /v1/topics/{topic}/timers/{id} 500",
		"POST /v1/topics/{topic}/timers/{id}/fire 500",
		"GET /v1/topics/{topic}/timeline 500",
		"GET /v1/topics 500",
		"GET /v1/topics/{topic} 500",
		"GET /v1/topics/{topic}/watch 500",
		"GET /v1/topics/{topic}/dead 500",
		"GET /v1/topics/{topic}/dead/{id} 500",
		"POST /v1/topics/{topic}/dead:replay 500",
		"POST /v1/topics/{topic}/dead:purge 500",
		"POST /v1/topics/{topic}/watch:ack 500",
		"GET /v1/stats 500",
		"POST /messages 500",
		"POST /v1/topics/{topic}/schedules 500",
		"GET /v1/topics/{topic}/schedules 500",
		"POST /v1/topics/{topic}/timers/{id}/pause 500",
		"POST /v1/topics/{topic}/timers/{id}/resume 500",
		"POST /v1/topics/{topic}/timers/{id}/backfill 500",
	} {
		notProducible[k] = bug
	}
}

// fullRun reports whether the whole package ran (no -run, -skip or
// -fuzz), so that the coverage check is meaningful.
func fullRun() bool {
	for _, name := range []string{"test.run", "test.skip", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}

// checkCoverage: every documented operation+status was answered by some
// test of the package, except the listed ones, which must be documented
// and must really not have been answered (a stale entry is an error too).
func checkCoverage() error {
	seenMu.Lock()
	seen := make([]string, 0, len(seenAll))
	for k := range seenAll {
		seen = append(seen, k)
	}
	seenMu.Unlock()
	var errs []error
	documented := map[string]bool{}
	for _, o := range spec.Operations() {
		for _, st := range o.Statuses {
			documented[o.Key(st)] = true
		}
	}
	for _, k := range spec.Missing(seen) {
		if _, ok := notProducible[k]; !ok {
			errs = append(errs, fmt.Errorf("no test got %s", k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(notProducible)) {
		switch {
		case !documented[k]:
			errs = append(errs, fmt.Errorf("notProducible lists %s, which is not documented", k))
		case slices.Contains(seen, k):
			errs = append(errs, fmt.Errorf("notProducible lists %s, but a test got it: remove it from the list", k))
		}
	}
	return errors.Join(errs...)
}

// TestCoverageCheck: the check itself finds a missing answer, counts a
// 405 seen on any method of a path for the path, and refuses stale
// exemptions.
func TestCoverageCheck(t *testing.T) {
	t.Parallel()
	all := func() []string {
		var out []string
		for _, o := range spec.Operations() {
			for _, st := range o.Statuses {
				out = append(out, o.Key(st))
			}
		}
		return out
	}
	if m := spec.Missing(all()); len(m) != 0 {
		t.Errorf("everything seen, missing %v", m)
	}
	seen := slices.DeleteFunc(all(), func(k string) bool {
		return k == "GET /v1/topics/{topic}/timers/{id} 404" || strings.HasSuffix(k, " 405") && strings.Contains(k, " /v1/topics/{topic}/timers ")
	})
	m := spec.Missing(seen)
	if !slices.Contains(m, "GET /v1/topics/{topic}/timers/{id} 404") || !slices.Contains(m, "POST /v1/topics/{topic}/timers 405") ||
		!slices.Contains(m, "GET /v1/topics/{topic}/timers 405") {
		t.Errorf("missing %v", m)
	}
	m = spec.Missing(append(seen, "PATCH /v1/topics/{topic}/timers 405"))
	if slices.Contains(m, "POST /v1/topics/{topic}/timers 405") || slices.Contains(m, "GET /v1/topics/{topic}/timers 405") {
		t.Errorf("a 405 to PATCH did not count for the path: missing %v", m)
	}
	if len(spec.Operations()) < 15 {
		t.Errorf("only %d operations documented", len(spec.Operations()))
	}
}

// statusNames are the net/http constants the server's errorf calls use.
var statusNames = map[string]int{
	"StatusBadRequest": 400, "StatusUnauthorized": 401, "StatusForbidden": 403, "StatusNotFound": 404, "StatusMethodNotAllowed": 405,
	"StatusRequestTimeout": 408, "StatusConflict": 409, "StatusMisdirectedRequest": 421, "StatusRequestEntityTooLarge": 413, "StatusInternalServerError": 500,
	"StatusNotImplemented": 501, "StatusServiceUnavailable": 503,
}

// serverCodes reads the server's Go source and returns every error code
// it can answer, with the statuses it is given: errorf(status, "code", …)
// calls, codes assigned to an apiError (status: 0, kept from the error it
// changes) and literal JSON error bodies (status 0).
// serverSource is the directory of the API's source (package
// github.com/ontime-go/ontime/internal/server) from this test's directory.
var serverSource = filepath.Join("..", "..", "..", "..", "internal", "server")

func serverCodes(t *testing.T) map[string][]int {
	t.Helper()
	fset := token.NewFileSet()
	// The API's source is internal/server of the root module.
	files, err := filepath.Glob(filepath.Join(serverSource, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	add := func(code string, status int) {
		if !slices.Contains(out[code], status) {
			out[code] = append(out[code], status)
		}
	}
	jsonCode := regexp.MustCompile(`"code":"([a-z_]+)"`)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); !ok || id.Name != "errorf" || len(n.Args) < 2 {
					return true
				}
				code, err := strconv.Unquote(n.Args[1].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatalf("%s: errorf code: %v", fset.Position(n.Pos()), err)
				}
				status := 0
				switch a := n.Args[0].(type) {
				case *ast.SelectorExpr:
					status = statusNames[a.Sel.Name]
				case *ast.BasicLit:
					status, _ = strconv.Atoi(a.Value)
				}
				if status == 0 {
					t.Fatalf("%s: errorf status %T not understood; add it to statusNames", fset.Position(n.Pos()), n.Args[0])
				}
				add(code, status)
			case *ast.AssignStmt:
				if sel, ok := n.Lhs[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "code" {
					lit := n.Rhs[0].(*ast.BasicLit)
					code, _ := strconv.Unquote(lit.Value)
					add(code, 0)
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					for _, m := range jsonCode.FindAllStringSubmatch(n.Value, -1) {
						add(m[1], 0)
					}
				}
			}
			return true
		})
	}
	return out
}

// docCodes reads the error table of docs/api.md: code → statuses.
func docCodes(t *testing.T) map[string][]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatalf("docs/api.md: %v", err)
	}
	row := regexp.MustCompile("(?m)^\\| (\\d{3}) \\| `([a-z_]+)` \\|")
	out := map[string][]int{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		st, _ := strconv.Atoi(m[1])
		out[m[2]] = append(out[m[2]], st)
	}
	if len(out) == 0 {
		t.Fatal("docs/api.md: no error table found")
	}
	return out
}

// TestErrorCodes: the codes the server can answer, the ErrorCode enum of
// openapi.json and the table of docs/api.md are the same set, and the
// statuses the server gives each code are the ones the table documents.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	srv := serverCodes(t)
	docs := docCodes(t)
	enum, err := spec.ErrorCodes()
	if err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string][]int) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	slices.Sort(enum)
	if s, d := keys(srv), keys(docs); !slices.Equal(s, d) || !slices.Equal(s, enum) {
		t.Errorf("error codes differ:\n server:  %v\n api.md:  %v\n openapi: %v", s, d, enum)
	}
	for code, statuses := range srv {
		for _, st := range statuses {
			if st != 0 && !slices.Contains(docs[code], st) {
				t.Errorf("the server answers %s with %d; docs/api.md gives %v", code, st, docs[code])
			}
		}
	}
	if len(srv) < 20 {
		t.Errorf("only %d codes found in the server's source: %v", len(srv), keys(srv))
	}
}
