package proxy

import (
	"context"
	"fmt"
	"net/url"

	"github.com/tollgate/tollgate/proxy/netguard"
)

// ValidateUpstream checks a route's upstream URL when it is saved: what
// guard.CheckURL checks, and no query or fragment, which the gateway would not
// forward. A name that does not resolve now is accepted: the dial-time check
// still applies.
func ValidateUpstream(ctx context.Context, guard *netguard.Guard, raw string) (*url.URL, error) {
	u, err := guard.CheckURL(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("upstream %w", err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("upstream URL %q must not have a query or fragment", raw)
	}
	return u, nil
}
