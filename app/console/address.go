package console

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// clientAddress is the caller's address: the connection's peer, or, when
// the deployment says a trusted proxy sets it (Options.ClientIPHeader), that
// header's address. From X-Forwarded-For only the last entry counts, the one
// the proxy appended: entries before it are whatever the caller sent. A
// header that is missing or holds no address leaves the peer, the proxy,
// which shares one bucket among its callers rather than handing out new ones.
func (c *Console) clientAddress(r *http.Request) string {
	if c.clientIPHeader != "" {
		if values := r.Header.Values(c.clientIPHeader); len(values) > 0 {
			last := values[len(values)-1]
			last = strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:])
			if addr, err := netip.ParseAddr(last); err == nil {
				return addr.Unmap().String()
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// addressBucket is the throttle key of an address. An IPv6 caller counts by
// its /64, the block one subscriber is usually given, so stepping through it
// does not open a fresh bucket per guess.
func addressBucket(address string) string {
	if addr, err := netip.ParseAddr(address); err == nil && addr.Unmap().Is6() {
		p, _ := addr.WithZone("").Prefix(64)
		return "address:" + p.String()
	}
	return "address:" + address
}
