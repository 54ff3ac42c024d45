package app

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// onlyHosts answers 421 to a request whose Host allowed refuses, and nothing
// else: a page whose own name an attacker points at the gateway's address
// (DNS rebinding) sends that name, so its requests never reach the handler.
func onlyHosts(allowed func(host string) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !allowed(hostname(r.Host)) {
				http.Error(w, "misdirected request: unknown host", http.StatusMisdirectedRequest)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// publicHost allows PUBLIC_URL's host name, whatever the port (a TLS proxy in
// front drops or changes it; the name is what a rebinding page cannot fake).
// A loopback PUBLIC_URL (make run, tests) allows every loopback name, so
// localhost and 127.0.0.1 both reach it: no page of an attacker's is served
// under a loopback name.
func publicHost(publicURL string) func(string) bool {
	u, err := url.Parse(publicURL)
	want := ""
	if err == nil {
		want = hostname(u.Host)
	}
	loopback := loopbackName(want)
	return func(host string) bool {
		return host == want || loopback && loopbackName(host)
	}
}

// adminHost allows IP literals, loopback names and the operator's ADMIN_HOSTS
// on the admin listener; an empty Host (HTTP/1.0) is no browser's.
func adminHost(list string) func(string) bool {
	hosts := strings.Split(list, ",")
	return func(host string) bool {
		if _, err := netip.ParseAddr(host); err == nil {
			return true
		}
		return host == "" || loopbackName(host) || slices.Contains(hosts, host)
	}
}

// hostname is a Host header's name: lower case, without port, brackets or a
// trailing dot.
func hostname(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// loopbackName reports whether host always means this machine: localhost
// and loopback addresses. (Subdomains of localhost are left out: not every
// resolver keeps them off the DNS.)
func loopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}
