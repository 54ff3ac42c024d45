package proxy

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/proxy/breaker"
	"github.com/tollgate/tollgate/proxy/providerlimits"
)

// QueuedHeader says how long a request waited before the gateway sent it or
// refused it: in its team's fair waiting room, then for its provider
// account's capacity.
const QueuedHeader = "X-Tollgate-Queued-Ms"

// errProviderLimited: the route's targets are known exhausted at the provider
// for longer than the gateway waits, so the request is not sent into a 429.
type errProviderLimited struct{ retryIn time.Duration }

func (e *errProviderLimited) Error() string {
	return "the provider account's rate limit is reached for every target of the route; retry in " + e.retryIn.String()
}

func limitKey(tg *Target) providerlimits.Key {
	return providerlimits.Key{ID: tg.id, Upstream: tg.Upstream.Host, Credential: tg.CredentialEnv}
}

// pickFirst chooses the first attempt's target. With provider limits tracked,
// a target whose account has room comes first; when none has, the request
// waits for the chosen one's capacity (Options.MaxWait of the tracker) or is
// refused with errProviderLimited, before anything is sent.
func (b *balancer) pickFirst(ctx context.Context, route *Route, usable func(*Target) bool, t *target) (int, *health, breaker.Permit, error) {
	if b.limits == nil {
		return b.ups.pick(route, 0, usable)
	}
	i, h, p, err := b.ups.pick(route, 0, func(tg *Target) bool { return usable(tg) && b.limits.Room(limitKey(tg)) })
	if err != nil {
		if i, h, p, err = b.ups.pick(route, 0, usable); err != nil {
			return i, h, p, err
		}
	}
	res := b.limits.Reserve(limitKey(&route.Targets[i]))
	if !res.OK {
		h.breaker.Release(p)
		return 0, nil, breaker.Permit{}, &errProviderLimited{retryIn: res.RetryAfter}
	}
	t.reservation = res
	if res.Wait > 0 {
		t.queued += res.Wait
		if !sleepCtx(ctx, res.Wait) {
			res.Cancel()
			h.breaker.Release(p)
			return 0, nil, breaker.Permit{}, context.Cause(ctx)
		}
	}
	return i, h, p, nil
}

// observeLimits learns from an attempt's answer what the target's account has left.
func (b *balancer) observeLimits(tg *Target, res providerlimits.Reservation, sentAt time.Time, resp *http.Response) {
	if b.limits != nil && resp != nil {
		b.limits.Observe(limitKey(tg), res, sentAt, resp.StatusCode, resp.Header)
	}
}

func (b *balancer) limitsNow() time.Time {
	if b.limits == nil {
		return time.Time{}
	}
	return b.limits.Now()
}

// setQueued reports a wait for the provider's capacity on the answer.
func setQueued(h http.Header, t *target) {
	if t.queued > 0 {
		h.Set(QueuedHeader, strconv.FormatInt(max(1, ceilMillis(t.queued)), 10))
	}
}

// RunProviderLimits shares what this replica learns of the provider accounts'
// limits with the other replicas through Redis until ctx ends; without Redis,
// or with the awareness off, it returns at once.
func (g *Gateway) RunProviderLimits(ctx context.Context) {
	if g.opts.ProviderLimits == nil {
		return
	}
	g.opts.ProviderLimits.Run(ctx, func() []providerlimits.Key {
		var keys []providerlimits.Key
		for _, route := range g.opts.Snapshots.Current().allRoutes() {
			for i := range route.Targets {
				keys = append(keys, limitKey(&route.Targets[i]))
			}
		}
		return keys
	})
}

// ProviderLimitStats reads what is known of each target's account, for
// metrics; nil with the awareness off.
func (g *Gateway) ProviderLimitStats() []providerlimits.Stat {
	if g.opts.ProviderLimits == nil {
		return nil
	}
	return g.opts.ProviderLimits.Stats()
}
