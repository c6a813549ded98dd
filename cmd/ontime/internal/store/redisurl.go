package store

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisTLS is the TLS material of a rediss:// connection beyond what the
// URL says: a CA to trust instead of the system's (a private CA, as Redis
// deployments often have), and a client certificate when the server asks
// for one (tls-auth-clients).
type RedisTLS struct {
	CAFile   string // PEM certificates to trust
	CertFile string // PEM client certificate
	KeyFile  string // PEM key of CertFile
}

func (t RedisTLS) set() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// apply adds the material to c (nil when the URL is not rediss).
func (t RedisTLS) apply(c *tls.Config) error {
	if !t.set() {
		return nil
	}
	if c == nil {
		return errors.New("redis TLS files are set but the URL does not use TLS: use rediss:// (rediss+cluster://, rediss+sentinel://)")
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return fmt.Errorf("redis TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("redis TLS CA %s: no PEM certificate in it", t.CAFile)
		}
		c.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("redis TLS: a client certificate needs both its certificate and its key file")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return fmt.Errorf("redis TLS client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return nil
}

// newRedisClient makes a client from a URL (see NewRedisClient) with the
// TLS material tlsFiles.
func newRedisClient(u string, tlsFiles RedisTLS) (redis.UniversalClient, error) {
	switch {
	case hasScheme(u, "redis+cluster"), hasScheme(u, "rediss+cluster"):
		plain, err := seedList(trimPlus(u), "addr")
		if err != nil {
			return nil, err
		}
		o, err := redis.ParseClusterURL(plain)
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", redact(err))
		}
		if err := tlsFiles.apply(o.TLSConfig); err != nil {
			return nil, err
		}
		return redis.NewClusterClient(o), nil
	case hasScheme(u, "redis+sentinel"), hasScheme(u, "rediss+sentinel"):
		o, err := parseSentinelURL(trimPlus(u))
		if err != nil {
			return nil, err
		}
		if err := tlsFiles.apply(o.TLSConfig); err != nil {
			return nil, err
		}
		return redis.NewFailoverClient(o), nil
	default:
		o, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("redis URL: %w", redact(err))
		}
		if err := tlsFiles.apply(o.TLSConfig); err != nil {
			return nil, err
		}
		return redis.NewClient(o), nil
	}
}

// redact keeps a password that a URL parse error quotes out of the error.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// trimPlus turns redis+cluster://, rediss+sentinel://, ... into redis://
// or rediss://.
func trimPlus(u string) string {
	scheme, rest, _ := strings.Cut(u, "://")
	base, _, _ := strings.Cut(scheme, "+")
	return base + "://" + rest
}

// seedList rewrites a host list "h1:p1,h2:p2,h3:p3" into the first host and
// a query parameter param for each other one (go-redis's form).
func seedList(u, param string) (string, error) {
	scheme, rest, _ := strings.Cut(u, "://")
	auth := ""
	if i := strings.LastIndex(rest[:hostEnd(rest)], "@"); i >= 0 {
		auth, rest = rest[:i+1], rest[i+1:]
	}
	end := hostEnd(rest)
	hosts, tail := rest[:end], rest[end:]
	list := strings.Split(hosts, ",")
	for _, h := range list {
		if h == "" {
			return "", fmt.Errorf("redis URL: empty host in the list %q", hosts)
		}
	}
	var extra []string
	for _, h := range list[1:] {
		extra = append(extra, param+"="+url.QueryEscape(h))
	}
	if len(extra) > 0 {
		sep := "?"
		if strings.Contains(tail, "?") {
			sep = "&"
		}
		tail += sep + strings.Join(extra, "&")
	}
	return scheme + "://" + auth + list[0] + tail, nil
}

// hostEnd is the end of the authority (user info and hosts) in s, the
// part of a URL after "://".
func hostEnd(s string) int {
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		return i
	}
	return len(s)
}

// parseSentinelURL reads redis://[user:password@]sentinel1:port,sentinel2:port/master[/db][?params]:
// the user and password are the data nodes' (the ACL user ontime runs as),
// the sentinels' own credentials, if they have any, are the
// sentinel_username and sentinel_password parameters; other parameters
// are go-redis's (dial_timeout, ...).
func parseSentinelURL(u string) (*redis.FailoverOptions, error) {
	scheme, rest, _ := strings.Cut(u, "://")
	var user, pass string
	hasPass := false
	if i := strings.LastIndex(rest[:hostEnd(rest)], "@"); i >= 0 {
		info := rest[:i]
		rest = rest[i+1:]
		var err error
		name, pw, ok := strings.Cut(info, ":")
		if user, err = url.PathUnescape(name); err != nil {
			return nil, errors.New("redis URL: bad user name escape")
		}
		if ok {
			hasPass = true
			if pass, err = url.PathUnescape(pw); err != nil {
				return nil, errors.New("redis URL: bad password escape")
			}
		}
	}
	end := hostEnd(rest)
	hosts, tail := rest[:end], rest[end:]
	path, query, _ := strings.Cut(tail, "?")
	segs := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	if len(segs) == 0 || len(segs) > 2 {
		return nil, errors.New("redis+sentinel URL: want redis+sentinel://sentinel1:26379,sentinel2:26379/<master name>[/<db>]")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	sUser, sPass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	if q.Has("master_name") || q.Has("username") || q.Has("password") {
		return nil, errors.New("redis+sentinel URL: the master name is the path, the data nodes' user and password are the URL's user info")
	}
	q.Set("master_name", segs[0])
	if user != "" {
		q.Set("username", user)
	}
	if hasPass {
		q.Set("password", pass)
	}
	sAuth := ""
	if sUser != "" || sPass != "" {
		sAuth = url.UserPassword(sUser, sPass).String() + "@"
	}
	db := ""
	if len(segs) == 2 {
		db = "/" + segs[1]
	}
	plain, err := seedList(scheme+"://"+sAuth+hosts+db+"?"+q.Encode(), "addr")
	if err != nil {
		return nil, err
	}
	o, err := redis.ParseFailoverURL(plain)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", redact(err))
	}
	return o, nil
}

func hasScheme(u, scheme string) bool { return strings.HasPrefix(u, scheme+"://") }
