package devcerts_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/devcerts"
)

// TestMutualTLSWithTheCertificates: a server on the server certificate that
// requires a client certificate from the CA accepts toolgate's client
// certificate, at 127.0.0.1 and as localhost, and refuses a client without
// one; a second Write keeps the set it finds.
func TestMutualTLSWithTheCertificates(t *testing.T) {
	dir := t.TempDir()
	made, err := devcerts.Write(dir, time.Now())
	if err != nil || !made {
		t.Fatalf("write: %v %v", made, err)
	}
	if info, _ := os.Stat(filepath.Join(dir, devcerts.ClientKeyFile)); info.Mode().Perm() != 0o600 {
		t.Fatalf("the client key is %v", info.Mode().Perm())
	}
	path := func(f string) string { return filepath.Join(dir, f) }
	caPEM, _ := os.ReadFile(path(devcerts.CAFile))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	serverCert, err := tls.LoadX509KeyPair(path(devcerts.ServerCertFile), path(devcerts.ServerKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = c.Write([]byte("ok")); c.Close() }()
		}
	}()
	client, err := tls.LoadX509KeyPair(path(devcerts.ClientCertFile), path(devcerts.ClientKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	dial := func(name string, certs []tls.Certificate) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: name, Certificates: certs})
		if err != nil {
			return err
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		if err == nil && string(b) != "ok" {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	for _, name := range []string{"127.0.0.1", devcerts.ServerName} {
		if err := dial(name, []tls.Certificate{client}); err != nil {
			t.Errorf("as %s with the client certificate: %v", name, err)
		}
	}
	if err := dial("127.0.0.1", nil); err == nil {
		t.Error("a client without a certificate was served")
	}
	if err := dial("example.com", []tls.Certificate{client}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("another server name: %v", err)
	}
	if made, err := devcerts.Write(dir, time.Now()); err != nil || made {
		t.Fatalf("a second write made new certificates: %v %v", made, err)
	}
	if made, err := devcerts.Write(dir, time.Now().Add(devcerts.Validity)); err != nil || !made {
		t.Fatalf("certificates about to expire were kept: %v %v", made, err)
	}
}
