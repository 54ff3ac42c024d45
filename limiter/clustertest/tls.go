package clustertest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TLSServer is a redis-server that speaks only TLS, with a certificate for
// 127.0.0.1 and localhost signed by a CA the test made.
type TLSServer struct {
	Addr string
	// CAFile is the PEM of the CA that signed the server certificate.
	CAFile string
}

// URL is the server's rediss:// URL.
func (s *TLSServer) URL() string { return "rediss://" + s.Addr + "/0" }

// StartTLS starts a TLS-only redis-server. A redis-server built without TLS
// skips the test, except under CI: Debian's redis-server (what CI installs)
// is built with TLS, so there a server without it is a broken machine.
func StartTLS(t testing.TB) *TLSServer {
	t.Helper()
	RequireRedisServer(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := writeCerts(t, dir)
	port := freePorts(t, 1)[0]
	s := &TLSServer{Addr: addr(port), CAFile: caFile}
	args := append(commonArgs(0), "--tls-port", strconv.Itoa(port), "--tls-cert-file", certFile,
		"--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no", "--dir", dir)
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(pem)
	_, err := startProcess(t, dir, args, func(ctx context.Context) error {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1,
			TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
		defer c.Close()
		return c.Ping(ctx).Err()
	})
	// A build without TLS does not know the tls-port directive at all.
	if exit, ok := errors.AsType[*exitError](err); ok && strings.Contains(exit.output, "'tls-port") &&
		strings.Contains(exit.output, "Bad directive") {
		if os.Getenv("CI") != "" {
			t.Fatalf("this redis-server has no TLS support, and CI is set (Debian's has it): %v", err)
		}
		t.Skipf("this redis-server was built without TLS support (BUILD_TLS=no): %s", strings.TrimSpace(exit.output))
	}
	if err != nil {
		t.Fatalf("clustertest: TLS server: %v", err)
	}
	return s
}

// writeCerts makes a CA and a server certificate it signs, valid for an hour,
// and writes ca.pem, server.pem and server.key into dir.
func writeCerts(t testing.TB, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey := newKey(t)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tollgate test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey := newKey(t)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	writePEM(t, caFile, "CERTIFICATE", caDER)
	writePEM(t, certFile, "CERTIFICATE", srvDER)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return caFile, certFile, keyFile
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
