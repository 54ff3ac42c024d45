package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrForbiddenAddress is returned when an upstream resolves to an address the
// gateway must never call: link-local (which holds every cloud's metadata
// service), unspecified, multicast or broadcast. Loopback and private ranges stay
// allowed because self-hosted upstreams and the mock provider live there.
var ErrForbiddenAddress = errors.New("upstream address is link-local, metadata, unspecified or multicast")

// Cloud metadata endpoints outside link-local space.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

// ForbiddenAddr reports whether the gateway must refuse to connect to a.
func ForbiddenAddr(a netip.Addr) bool {
	a = a.Unmap() // ::ffff:169.254.169.254 is 169.254.169.254
	if a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() ||
		a.IsMulticast() || a.IsInterfaceLocalMulticast() || a == netip.MustParseAddr("255.255.255.255") {
		return true
	}
	for _, m := range metadataAddrs {
		if a == m {
			return true
		}
	}
	return false
}

// dialControl refuses forbidden addresses at connect time, after DNS, so a name
// that resolves (or re-resolves) to metadata is caught as surely as a literal.
func dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, ErrForbiddenAddress)
	}
	if ForbiddenAddr(ap.Addr()) {
		return fmt.Errorf("dial %s: %w", ap.Addr(), ErrForbiddenAddress)
	}
	return nil
}

// ValidateUpstream checks a route's upstream URL when it is saved: http(s) only,
// no credentials, query or fragment, no IP literal in a non-canonical form
// (decimal, hex, octal or shortened IPv4 that some resolvers expand), and no
// literal or resolved address that ForbiddenAddr refuses. A name that does not
// resolve now is accepted: the dial-time check still applies.
func ValidateUpstream(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("upstream URL %q does not parse", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("upstream URL %q must start with http:// or https://", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("upstream URL must not carry credentials; use the route's credential variable")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("upstream URL %q must not have a query or fragment", raw)
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("upstream URL %q has no host", raw)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if ForbiddenAddr(addr) {
			return nil, fmt.Errorf("upstream %s: %w", host, ErrForbiddenAddress)
		}
		return u, nil
	}
	if looksNumeric(host) {
		return nil, fmt.Errorf("upstream host %q is an IP address in a non-standard form; write it as a dotted quad", host)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return u, nil
	}
	for _, a := range addrs {
		if ForbiddenAddr(a) {
			return nil, fmt.Errorf("upstream %s resolves to %s: %w", host, a, ErrForbiddenAddress)
		}
	}
	return u, nil
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
