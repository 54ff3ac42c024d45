package netguard_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/proxy/netguard"
)

func mustAllow(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := netguard.ParseAllow(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheck(t *testing.T) {
	t.Parallel()
	g := netguard.New(netguard.Options{Allow: mustAllow(t, "10.0.0.0/8, 127.0.0.1")})
	for addr, ok := range map[string]bool{
		"169.254.169.254:80":          false,
		"[::ffff:169.254.169.254]:80": false,
		"[::ffff:a9fe:a9fe]:80":       false,
		"[64:ff9b::a9fe:a9fe]:80":     false, // NAT64 of the metadata address
		"[fe80::1]:80":                false,
		"0.0.0.0:80":                  false,
		"0.1.2.3:80":                  false,
		"[::]:80":                     false,
		"224.0.0.1:80":                false,
		"255.255.255.255:80":          false,
		"[fd00:ec2::254]:80":          false,
		"100.100.100.200:80":          false,
		"127.0.0.1:9999":              true, // allow-listed
		"127.0.0.2:9999":              false,
		"[::1]:9999":                  false,
		"10.0.0.7:443":                true, // allow-listed
		"192.168.1.10:443":            false,
		"172.16.0.1:443":              false,
		"100.64.0.1:443":              false,
		"[fd12::1]:443":               false,
		"[64:ff9b::a00:7]:443":        true, // NAT64 of 10.0.0.7
		"104.18.0.1:443":              true,
		"[2606:4700::1]:443":          true,
	} {
		err := g.Check(netip.MustParseAddrPort(addr))
		if (err == nil) != ok {
			t.Errorf("Check(%s) = %v, want ok=%v", addr, err, ok)
		}
		if err != nil && !errors.Is(err, netguard.ErrForbidden) {
			t.Errorf("Check(%s) = %v, not ErrForbidden", addr, err)
		}
	}
}

// TestOwnListenersRefusedEvenIfAllowed: the gateway's own ports on loopback,
// on the unspecified address it is bound to, and on its interfaces' addresses
// are refused though loopback is allow-listed; other ports are not.
func TestOwnListenersRefusedEvenIfAllowed(t *testing.T) {
	t.Parallel()
	g := netguard.New(netguard.Options{Allow: mustAllow(t, "127.0.0.0/8,::1,10.0.0.0/8,192.168.0.0/16,172.16.0.0/12,fc00::/7")})
	g.Register(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, &net.TCPAddr{IP: net.IPv6unspecified, Port: 9090}, nil)
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": false,
		"127.0.0.5:8080": false,
		"[::1]:8080":     false,
		"127.0.0.1:9090": false,
		"[::1]:9090":     false,
		"127.0.0.1:8081": true,
		"10.9.9.9:9090":  true, // not this host
	} {
		err := g.Check(netip.MustParseAddrPort(addr))
		if (err == nil) != ok {
			t.Errorf("Check(%s) = %v, want ok=%v", addr, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "own listener") {
			t.Errorf("Check(%s) = %v, want it named the gateway's own listener", addr, err)
		}
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ia := range ifaddrs {
		p, err := netip.ParsePrefix(ia.String())
		if err != nil || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		if err := g.Check(netip.AddrPortFrom(p.Addr(), 9090)); err == nil {
			t.Errorf("Check(%s:9090) passed: the admin listener is bound to every interface", p.Addr())
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	g := netguard.New(netguard.Options{Allow: mustAllow(t, "127.0.0.0/8,::1")})
	g.Register(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080})
	for raw, ok := range map[string]bool{
		"https://api.anthropic.com":         true,
		"http://127.0.0.1:9999":             true,
		"http://[::1]:8080/base":            false, // own listener
		"http://127.0.0.1:8080":             false, // own listener
		"http://localhost:8080/x":           false, // resolves to it
		"http://localhost:9999":             true,
		"http://169.254.169.254":            false,
		"http://[::ffff:169.254.169.254]":   false,
		"http://[fe80::1]":                  false,
		"http://0.0.0.0:80":                 false,
		"http://2852039166/":                false, // decimal 169.254.169.254
		"http://0xa9fea9fe/":                false, // hex
		"http://0251.0376.0251.0376/":       false, // octal
		"http://169.254.43518/":             false, // short form
		"http://10.0.0.1/":                  false, // private, not allow-listed
		"http://user:pass@example.com":      false,
		"ftp://example.com":                 false,
		"https://":                          false,
		"https://login.example/?p=B2C_flow": true, // queries are the caller's business
	} {
		_, err := g.CheckURL(context.Background(), raw)
		if (err == nil) != ok {
			t.Errorf("CheckURL(%q) error = %v, want ok=%v", raw, err, ok)
		}
	}
}

// TestDialTimeCatchesNamesThatChange: a name that resolved to a public
// address when it was checked, and to loopback when dialled, is refused at the
// dial, and nothing of the listener's answer is read.
func TestDialTimeCatchesNamesThatChange(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "internal secrets")
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	g := netguard.New(netguard.Options{Allow: mustAllow(t, "10.0.0.0/8"),
		LookupNetIP: func(context.Context, string, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil
		}})
	raw := "http://localhost:" + port + "/"
	if _, err := g.CheckURL(context.Background(), raw); err != nil {
		t.Fatalf("CheckURL(%s) with the name resolving to a public address: %v", raw, err)
	}
	resp, err := g.Client(0).Get(raw)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("the dial went through to loopback: %d %s", resp.StatusCode, body)
	}
	if !errors.Is(err, netguard.ErrForbidden) || !strings.Contains(err.Error(), "OUTBOUND_ALLOW") {
		t.Fatalf("error = %v, want the guard's refusal naming OUTBOUND_ALLOW", err)
	}
}

// TestClientRefusesRedirectsToForbiddenAddresses: the check is on every
// connection, so a redirect does not get around it.
func TestClientRefusesRedirectsToForbiddenAddresses(t *testing.T) {
	t.Parallel()
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "inner") }))
	t.Cleanup(inner.Close)
	_, innerPort, _ := net.SplitHostPort(inner.Listener.Addr().String())
	outer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://0.0.0.0:"+innerPort+"/", http.StatusFound)
	}))
	t.Cleanup(outer.Close)
	g := netguard.New(netguard.Options{Allow: mustAllow(t, "127.0.0.0/8")})
	if _, err := g.Client(0).Get(outer.URL); !errors.Is(err, netguard.ErrForbidden) {
		t.Fatalf("a redirect to 0.0.0.0: %v, want refused", err)
	}
}

func TestParseAllow(t *testing.T) {
	t.Parallel()
	got, err := netguard.ParseAllow(" 127.0.0.1/32, 10.0.0.0/8,fd00::/8 ,192.168.1.5,::ffff:172.16.0.0/108,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1/32", "10.0.0.0/8", "fd00::/8", "192.168.1.5/32", "172.16.0.0/12"}
	if len(got) != len(want) {
		t.Fatalf("ParseAllow = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("entry %d = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "169.254.0.0/16", "0.0.0.0/0", "224.0.0.0/4", "10.0.0.0/8,nonsense"} {
		if _, err := netguard.ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) accepted", bad)
		}
	}
}
