package server

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// What a request must pass before anything runs (Server.ServeHTTP, in this
// order): its Host must name this server (checkHost: a DNS-rebinding page
// sends its own name), a browser must not send it from another origin
// (checkOrigin: a form or fetch of another site), its bearer token must be
// valid (authenticate) and its role must allow the operation (the route's
// Role).

// Role is what a bearer token may do. Roles are ordered: each allows what
// the one below it does.
type Role int

// Roles.
const (
	// RoleNone is an anonymous caller on a server with tokens: only
	// /healthz and /readyz.
	RoleNone Role = iota
	// RoleRead reads: every GET (timers, topics, dead letters, stats,
	// the OpenAPI document), /metrics, and watch streams.
	RoleRead
	// RoleWrite also publishes, cancels and fires timers (and
	// POST /messages).
	RoleWrite
	// RoleAdmin also replays and purges dead letters: everything.
	RoleAdmin
)

// String returns the role's name as the configuration spells it.
func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// Token is a bearer token and its role.
type Token struct {
	Secret string
	Role   Role
}

type token struct {
	secret []byte
	role   Role
}

// authenticate returns the role of r's bearer token: RoleAdmin for every
// caller when the server has no tokens (auth off), RoleNone without a
// token; ok is false when a token was sent and matches none. Every
// configured token is compared, in constant time, whatever matches.
func (s *Server) authenticate(r *http.Request) (role Role, ok bool) {
	if len(s.tokens) == 0 {
		return RoleAdmin, true
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return RoleNone, true
	}
	tok, found := bearerToken(h)
	if !found {
		return RoleNone, false
	}
	got := []byte(tok)
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(got, t.secret) == 1 {
			role = max(role, t.role)
		}
	}
	return role, role != RoleNone
}

// checkHost refuses a request whose Host header does not name this
// server: what a DNS-rebinding page sends (its own name, now resolving to
// this server's address). Allowed are the literal IP address the client
// connected to, the loopback names (localhost, *.localhost, 127.0.0.0/8,
// ::1) when it connected over loopback, and Options.AllowedHosts (names,
// "*.example.com" for any subdomain, "*" for any host). The port is not
// compared. A request that did not come over a network connection (the
// CLI's in-process --redis mode) has no address to compare and passes, and
// so does one without a Host (HTTP/1.0 probes): browsers always send it.
func (s *Server) checkHost(r *http.Request) *apiError {
	if s.anyHost {
		return nil
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || r.Host == "" {
		return nil // not over the network, or an HTTP/1.0 probe without Host: no browser sends either
	}
	host := hostOnly(r.Host)
	if s.hostAllowed(host, local) {
		return nil
	}
	return errorf(http.StatusMisdirectedRequest, "misdirected_host",
		"the Host header %q does not name this server; add the name to allowed_hosts if clients reach the server by it", r.Host)
}

// hostOnly returns the host of a Host header, lower case, without port,
// brackets or a trailing dot.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

func (s *Server) hostAllowed(host string, local net.Addr) bool {
	ip := net.ParseIP(host)
	var localIP net.IP
	if ta, ok := local.(*net.TCPAddr); ok {
		localIP = ta.IP
	}
	switch {
	case ip != nil && localIP != nil && ip.Equal(localIP):
		return true
	case localIP != nil && localIP.IsLoopback() &&
		(ip != nil && ip.IsLoopback() || host == "localhost" || strings.HasSuffix(host, ".localhost")):
		return true
	}
	for _, a := range s.o.AllowedHosts {
		a = strings.ToLower(strings.TrimSuffix(a, "."))
		if host == a || strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:]) && len(host) > len(a)-1 {
			return true
		}
	}
	return false
}

// checkOrigin refuses what a browser sends from another origin with a
// method that changes something, with net/http's CrossOriginProtection
// (Sec-Fetch-Site, else Origin against Host): a form or a no-cors fetch
// of another page. A watch stream is a GET, but it takes the topic's
// timers from their target, so it is checked as a POST would be. Clients
// that send neither header (curl, the CLI, every HTTP library) pass.
func (s *Server) checkOrigin(r *http.Request, watch bool) *apiError {
	check := r
	if watch {
		check = r.WithContext(r.Context()) // a shallow copy
		check.Method = http.MethodPost
	}
	if err := s.cop.Check(check); err != nil {
		return errorf(http.StatusForbidden, "cross_origin", "a browser sent this request from another origin (Sec-Fetch-Site %q, Origin %q); only the dashboard's own pages may change timers",
			r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin"))
	}
	return nil
}
