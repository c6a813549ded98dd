// Package dashboard is ontime's web dashboard: topics with their counts and the
// lateness of the last minute, a topic's timeline of upcoming timers, a
// timer's details with cancel and "fire now", dead letters with replay and
// purge, refreshed every two seconds. It is a page of plain JavaScript and
// CSS embedded in the binary (no CDN, no build step: it works offline) that
// calls the ontime HTTP API with the same bearer tokens as the CLI.
//
// `ontime serve` serves it at /ui. To mount it in your own server next to
// an ontime.Client, New returns the dashboard together with the API it
// needs:
//
//	rec := dashboard.NewActivity() // optional: each topic's last minute
//	client, err := ontime.NewClient(drv, &ontime.Config{Hooks: []any{rec}})
//	...
//	mux.Handle("/ontime/", http.StripPrefix("/ontime", dashboard.New(client, &dashboard.Options{
//		Tokens:   []string{os.Getenv("ONTIME_UI_TOKEN")},
//		Activity: rec,
//	})))
//
// The dashboard is then at /ontime/ and its API at /ontime/api/v1/….
// Handler serves the page alone, for a server that already serves the API.
//
// The package depends on the ontime library alone (it is part of the root
// module): embedding it pulls neither the CLI, nor franz-go, nor a TOML
// decoder, and needs no replace directive.
package dashboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"

	"github.com/ontime-go/ontime"
	"github.com/ontime-go/ontime/internal/activity"
	"github.com/ontime-go/ontime/internal/server"
	"github.com/ontime-go/ontime/ontimedriver/ontimebolt"
	"github.com/ontime-go/ontime/ontimedriver/ontimeredis"
)

//go:embed static
var static embed.FS

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the dashboard's page and assets, to be mounted under a
// path prefix with http.StripPrefix (it serves "/", "/app.js", ...). The
// page calls the ontime HTTP API at apiBase, a path on the page's own
// origin such as "/" (the API at the root, as `ontime serve` has it) or
// "/ontime/api/"; "" means "api/" below the dashboard. The assets are
// public (they hold no data); every API call carries the bearer token the
// user enters in the page.
func Handler(apiBase string) http.Handler {
	if apiBase == "" {
		apiBase = "api/"
	}
	assets := map[string]asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		if name == "index.html" {
			b = bytes.ReplaceAll(b, []byte("{{API}}"), []byte(html.EscapeString(apiBase)))
			name = ""
		}
		sum := sha256.Sum256(b)
		assets["/"+name] = asset{body: b, ctype: contentType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // the embedded files are part of the binary
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := r.URL.Path
		if p == "" || p == "/index.html" {
			p = "/"
		}
		a, ok := assets[p]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("Referrer-Policy", "no-referrer")
		if match := r.Header.Get("If-None-Match"); match == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(a.body)
	})
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

// Options configure New.
type Options struct {
	// Tokens, when not empty, are the bearer tokens the API accepts (the
	// page asks the user for one), with the admin role: they may do
	// everything. Empty (and no ReadTokens or WriteTokens): no auth, so
	// mount it only where every client may manage timers.
	Tokens []string
	// ReadTokens may only look; WriteTokens may also cancel and fire
	// timers, but not replay or purge dead letters.
	ReadTokens, WriteTokens []string
	// AllowedHosts are the host names browsers reach your server by: the
	// API refuses (421) a request whose Host header names none of them,
	// nor the address the client connected to, nor localhost on a
	// loopback connection, so that a DNS-rebinding page cannot use it.
	// "*.example.com" allows every subdomain; "*" turns the check off.
	AllowedHosts []string
	// Activity, when set, is also in the Client's Config.Hooks: the topics
	// page then shows each topic's last minute (deliveries by the
	// Client's workers, their outcomes and lateness).
	Activity *Activity
	// Logger gets the API's store errors. Default slog.Default().
	Logger *slog.Logger
}

// New returns the dashboard and the HTTP API it calls, for client's store:
// the page at "/", the API (docs/api.md, without the watch stream) at
// "/api/". Mount it under a prefix with http.StripPrefix.
func New(client *ontime.Client, o *Options) http.Handler {
	if o == nil {
		o = &Options{}
	}
	so := server.Options{Client: client, Tokens: o.Tokens, AllowedHosts: o.AllowedHosts, Logger: o.Logger, StoreKind: storeKind(client)}
	for _, t := range o.ReadTokens {
		so.RoleTokens = append(so.RoleTokens, server.Token{Secret: t, Role: server.RoleRead})
	}
	for _, t := range o.WriteTokens {
		so.RoleTokens = append(so.RoleTokens, server.Token{Secret: t, Role: server.RoleWrite})
	}
	if o.Activity != nil {
		so.Activity = o.Activity.r
	}
	api := http.StripPrefix("/api", server.New(so))
	page := Handler("")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api" || strings.HasPrefix(r.URL.Path, "/api/") {
			api.ServeHTTP(w, r)
			return
		}
		page.ServeHTTP(w, r)
	})
}

func storeKind(c *ontime.Client) string {
	switch c.Driver().(type) {
	case *ontimebolt.Driver:
		return "embedded"
	case *ontimeredis.Driver:
		return "redis"
	}
	return ""
}

// Activity records what the topics of a Client did in the last minute
// (timers published, deliveries, outcomes, and how late they fired) for the
// dashboard. Add it to the Client's ontime.Config.Hooks and to
// Options.Activity. Memory is bounded: about 2 KiB per topic active in the
// last minute.
type Activity struct{ r *activity.Recorder }

// NewActivity returns an empty Activity.
func NewActivity() *Activity { return &Activity{r: activity.New()} }

var (
	_ ontime.AfterPublishHook = (*Activity)(nil)
	_ ontime.DeliveryEndHook  = (*Activity)(nil)
)

// AfterPublish implements ontime.AfterPublishHook.
func (a *Activity) AfterPublish(ctx context.Context, p *ontime.PublishEvent) {
	a.r.AfterPublish(ctx, p)
}

// DeliveryEnd implements ontime.DeliveryEndHook.
func (a *Activity) DeliveryEnd(ctx context.Context, d *ontime.Delivery, r ontime.DeliveryResult) {
	a.r.DeliveryEnd(ctx, d, r)
}
