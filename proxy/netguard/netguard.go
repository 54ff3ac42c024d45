// Package netguard decides which addresses the gateway may connect to when an
// owner, not the deployer, chose where it connects: route upstreams and their
// health probes, OIDC issuers with the token and key endpoints their discovery
// documents name, GitHub's endpoints. One Guard, built from the deployment's
// configuration, refuses:
//
//   - link-local (every cloud's metadata service), other metadata addresses,
//     unspecified, "this network" (0.0.0.0/8), multicast and broadcast, always;
//   - the gateway's own listeners, public and admin, always: a route to the admin
//     listener would hand a tenant /metrics and /debug/pprof;
//   - loopback, RFC 1918, ULA and CGNAT addresses unless the deployer lists them
//     (OUTBOUND_ALLOW): self-hosted upstreams live there, and so do the
//     deployment's databases and internal services.
//
// The decision is taken on the resolved address as the connection is made
// (Control), so a name that resolves differently after a save-time check
// (CheckURL) is caught as surely as a literal address.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrForbidden is what every refusal matches with errors.Is.
var ErrForbidden = errors.New("the gateway refuses to connect to this address")

// RefusedError says which address was refused and why; it names nothing of
// what the address would have answered.
type RefusedError struct {
	Addr   string // host, or host:port, as checked
	Reason string
}

func (e *RefusedError) Error() string { return e.Addr + " " + e.Reason }

// Is makes a RefusedError match ErrForbidden.
func (e *RefusedError) Is(target error) bool { return target == ErrForbidden }

// The reasons, worded for the owner who typed the URL.
const (
	reasonSpecial = "is a link-local, metadata, unspecified or multicast address, which the gateway never calls"
	reasonSelf    = "is this gateway's own listener"
	reasonPrivate = "is a loopback or private address, which the deployment's OUTBOUND_ALLOW does not list"
)

// Options configure a Guard.
type Options struct {
	// Allow lists the loopback and private addresses the deployer trusts
	// (OUTBOUND_ALLOW); ParseAllow reads them. It never lifts the refusal of
	// special addresses or of the gateway's own listeners.
	Allow []netip.Prefix
	// LookupNetIP resolves names for CheckURL (default net.DefaultResolver's);
	// tests replace it to play DNS that changes after the check. Dials always
	// use the system resolver and are checked on what it returned.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard decides. It is safe for concurrent use; Register may be called while
// it is in use.
type Guard struct {
	allow  []netip.Prefix
	lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)

	mu    sync.RWMutex
	own   []netip.AddrPort // the gateway's listeners, as bound
	local []netip.Addr     // this host's interface addresses, read at Register
}

// New returns a Guard.
func New(o Options) *Guard {
	g := &Guard{allow: o.Allow, lookup: o.LookupNetIP}
	if g.lookup == nil {
		g.lookup = net.DefaultResolver.LookupNetIP
	}
	return g
}

// Register adds the gateway's own listeners: a connection to one of their
// ports on a loopback, unspecified or local interface address, or on the
// address a listener is bound to, is refused.
func (g *Guard) Register(addrs ...net.Addr) {
	var own []netip.AddrPort
	for _, a := range addrs {
		var ap netip.AddrPort
		switch a := a.(type) {
		case nil:
			continue
		case *net.TCPAddr:
			ap = a.AddrPort() // its address is invalid for ":8080": every interface
		default:
			var err error
			if ap, err = netip.ParseAddrPort(a.String()); err != nil {
				continue
			}
		}
		own = append(own, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	}
	var local []netip.Addr
	if ifaddrs, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range ifaddrs {
			if p, err := netip.ParsePrefix(ia.String()); err == nil {
				local = append(local, p.Addr().Unmap())
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.own = append(g.own, own...)
	g.local = local
}

// Check decides one address and port; a refusal is a *RefusedError.
func (g *Guard) Check(ap netip.AddrPort) error {
	a := ap.Addr().Unmap() // ::ffff:169.254.169.254 is 169.254.169.254
	if v4, ok := nat64(a); ok {
		a = v4 // a DNS64 network reaches the IPv4 address this embeds
	}
	refuse := func(reason string) error { return &RefusedError{Addr: ap.String(), Reason: reason} }
	if special(a) {
		return refuse(reasonSpecial)
	}
	if g.isOwn(a, ap.Port()) {
		return refuse(reasonSelf)
	}
	if private(a) && !slices.ContainsFunc(g.allow, func(p netip.Prefix) bool { return p.Contains(a) }) {
		return refuse(reasonPrivate)
	}
	return nil
}

func (g *Guard) isOwn(a netip.Addr, port uint16) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, l := range g.own {
		if l.Port() == port && (a == l.Addr() || a.IsLoopback() || slices.Contains(g.local, a)) {
			return true
		}
	}
	return false
}

// Control is a net.Dialer's Control: it refuses the connection before it is
// made when its resolved address is refused.
func (g *Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Addr: address, Reason: "is not an IP address and port"}
	}
	return g.Check(ap)
}

// Dialer returns a dialer whose every connection is checked.
func (g *Guard) Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: g.Control}
}

// Client returns an HTTP client whose every connection is checked, redirects
// included, with timeout bounding each request. It ignores HTTP(S)_PROXY: a
// proxy would make the connection, out of the guard's sight.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext:           g.Dialer().DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}
}

// CheckURL checks a URL an owner supplies when it is saved, for a clear early
// error; the dial-time check still applies. It must be http(s) without
// credentials, its host not an IP address in a non-canonical form (decimal,
// hex, octal or shortened IPv4, which some resolvers expand), and neither the
// literal address nor any address the name resolves to now may be refused. A
// name that does not resolve now is accepted.
func (g *Guard) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("URL %q does not parse", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("URL %q must start with http:// or https://", raw)
	}
	if u.User != nil {
		return nil, errors.New("URL must not carry credentials")
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("URL %q has no host", raw)
	}
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("URL %q has no valid port", raw)
		}
		port = uint16(n)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if err := g.Check(netip.AddrPortFrom(addr, port)); err != nil {
			return nil, err
		}
		return u, nil
	}
	if looksNumeric(host) {
		return nil, fmt.Errorf("host %q is an IP address in a non-standard form; write it as a dotted quad", host)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := g.lookup(ctx, "ip", host)
	if err != nil {
		return u, nil
	}
	for _, a := range addrs {
		if err := g.Check(netip.AddrPortFrom(a, port)); err != nil {
			re := err.(*RefusedError)
			return nil, &RefusedError{Addr: host + " (" + re.Addr + ")", Reason: re.Reason}
		}
	}
	return u, nil
}

// ParseAllow reads OUTBOUND_ALLOW: comma-separated IP addresses and CIDR
// prefixes. An entry in special space (link-local, metadata, unspecified,
// multicast) is an error: the guard would refuse it anyway, and a deployer who
// wrote it expects otherwise.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var prefixes []netip.Prefix
	var problems []string
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		var p netip.Prefix
		var err error
		if strings.Contains(entry, "/") {
			p, err = netip.ParsePrefix(entry)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(entry); err == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%q is not an IP address or CIDR prefix such as 10.0.0.0/8", entry))
			continue
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		if special(p.Addr()) {
			problems = append(problems, fmt.Sprintf("%q starts in link-local, metadata, unspecified or multicast space, which the gateway never calls; list private ranges such as 10.0.0.0/8 instead", entry))
			continue
		}
		prefixes = append(prefixes, p)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return prefixes, nil
}

// Cloud metadata endpoints outside link-local space.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
)

// special addresses are refused whatever the allow-list says.
func special(a netip.Addr) bool {
	return a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || a.IsMulticast() ||
		a.IsInterfaceLocalMulticast() || a == broadcast || thisNetwork.Contains(a) || slices.Contains(metadataAddrs, a)
}

// private addresses are refused unless allow-listed.
func private(a netip.Addr) bool {
	return a.IsLoopback() || a.IsPrivate() || cgnat.Contains(a)
}

// nat64 returns the IPv4 address a well-known-prefix NAT64 address embeds.
func nat64(a netip.Addr) (netip.Addr, bool) {
	if !nat64Prefix.Contains(a) {
		return a, false
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:])), true
}

// looksNumeric catches 2852039166, 0xa9fea9fe, 0251.0376.0251.0376 and 169.254.43518:
// hosts made only of digits, dots and hex markers, which no real DNS name is.
func looksNumeric(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return false
		}
		l := strings.TrimPrefix(label, "0x")
		for _, c := range l {
			isHex := c >= '0' && c <= '9' || (l != label && c >= 'a' && c <= 'f')
			if !isHex {
				return false
			}
		}
	}
	return true
}
