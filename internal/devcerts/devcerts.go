// Package devcerts makes the certificates of make cluster's mTLS mode with
// Go's standard library: a certificate authority, the Temporal frontend's
// server certificate (localhost, 127.0.0.1, ::1), and client certificates
// for toolgate's processes and Temporal's own system worker. They are for a
// cluster on this machine only; a deployment brings its own.
package devcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files Write makes in its directory.
const (
	CAFile         = "ca.pem"
	ServerCertFile = "server.pem"
	ServerKeyFile  = "server.key"
	ClientCertFile = "client.pem"
	ClientKeyFile  = "client.key"
	WorkerCertFile = "system-worker.pem"
	WorkerKeyFile  = "system-worker.key"
)

// ServerName is the name the server certificate answers to (also 127.0.0.1).
const ServerName = "localhost"

// Validity is how long the certificates last.
const Validity = 90 * 24 * time.Hour

// Write makes the certificates in dir (mode 0700, keys 0600), unless a set
// made earlier is there and still valid for a day; it reports whether it
// made new ones.
func Write(dir string, now time.Time) (bool, error) {
	if valid(dir, now.Add(24*time.Hour)) {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("certificates: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, fmt.Errorf("certificates: %w", err)
	}
	caTmpl := template("toolgate dev CA", now)
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return false, fmt.Errorf("certificates: the CA: %w", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	if err := writePEM(filepath.Join(dir, CAFile), "CERTIFICATE", caDER, 0o644); err != nil {
		return false, err
	}
	for _, leaf := range []struct {
		name, cert, key string
		usage           x509.ExtKeyUsage
	}{
		{ServerName, ServerCertFile, ServerKeyFile, x509.ExtKeyUsageServerAuth},
		{"toolgate", ClientCertFile, ClientKeyFile, x509.ExtKeyUsageClientAuth},
		{"temporal-system-worker", WorkerCertFile, WorkerKeyFile, x509.ExtKeyUsageClientAuth},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return false, fmt.Errorf("certificates: %w", err)
		}
		tmpl := template(leaf.name, now)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{leaf.usage}
		if leaf.usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{ServerName}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return false, fmt.Errorf("certificates: %s: %w", leaf.name, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return false, fmt.Errorf("certificates: %s: %w", leaf.name, err)
		}
		if err := writePEM(filepath.Join(dir, leaf.cert), "CERTIFICATE", der, 0o644); err != nil {
			return false, err
		}
		if err := writePEM(filepath.Join(dir, leaf.key), "PRIVATE KEY", keyDER, 0o600); err != nil {
			return false, err
		}
	}
	return true, nil
}

func template(cn string, now time.Time) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: []string{"toolgate dev"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity)}
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	b := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, b, mode); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	return nil
}

// valid reports whether dir holds a whole set, each certificate signed by
// the CA there and valid at until.
func valid(dir string, until time.Time) bool {
	ca, err := load(filepath.Join(dir, CAFile))
	if err != nil {
		return false
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, f := range []string{ServerCertFile, ClientCertFile, WorkerCertFile} {
		c, err := load(filepath.Join(dir, f))
		if err != nil {
			return false
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: until, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return false
		}
	}
	for _, f := range []string{ServerKeyFile, ClientKeyFile, WorkerKeyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}

func load(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New(path + ": not a PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}
