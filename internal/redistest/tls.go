package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are a CA, a server certificate it signed (for 127.0.0.1 and
// localhost) and a client certificate it signed, as PEM files in a
// temporary directory, for [WithTLS] servers and their clients.
type TLSFiles struct {
	CAFile, CertFile, KeyFile     string // the CA, the server's certificate and key
	ClientCertFile, ClientKeyFile string // a client certificate and key
	caPool                        *x509.CertPool
	clientCert                    tls.Certificate
}

// NewTLSFiles makes a fresh CA and the certificates it signs (ECDSA P-256,
// valid for a day), removed when tb ends.
func NewTLSFiles(tb testing.TB) *TLSFiles {
	tb.Helper()
	f, err := newTLSFiles(tb.TempDir())
	if err != nil {
		tb.Fatalf("redistest: making TLS certificates: %v", err)
	}
	return f
}

func newTLSFiles(dir string) (*TLSFiles, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	f := &TLSFiles{CAFile: filepath.Join(dir, "ca.pem"), caPool: x509.NewCertPool()}
	f.caPool.AddCert(ca)
	if err := writePEM(f.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (certFile, keyFile string, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return "", "", err
		}
		certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return certFile, keyFile, writePEM(keyFile, "EC PRIVATE KEY", kder)
	}
	if f.CertFile, f.KeyFile, err = leaf(2, "server", x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if f.ClientCertFile, f.ClientKeyFile, err = leaf(3, "client", x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if f.clientCert, err = tls.LoadX509KeyPair(f.ClientCertFile, f.ClientKeyFile); err != nil {
		return nil, err
	}
	return f, nil
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ClientConfig returns a TLS configuration that trusts the CA (and
// presents the client certificate when the server asks for one).
func (f *TLSFiles) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: f.caPool, Certificates: []tls.Certificate{f.clientCert}, MinVersion: tls.VersionTLS12}
}

// WithTLS makes the server speak TLS only, with f's server certificate, on
// its port (Addr): plain connections are refused. Clients need
// f.ClientConfig (or the CA file); a client certificate is optional
// (tls-auth-clients optional).
func WithTLS(f *TLSFiles) ServerOption { return func(c *serverConfig) { c.tls = f } }
