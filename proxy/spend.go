package proxy

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy/estimate"
	"github.com/tollgate/tollgate/proxy/usage"
)

// meter is what the gateway decided a request may cost before forwarding it.
type meter struct {
	kind   usage.Kind
	paid   bool // the route reaches a paid upstream
	priced bool // and this endpoint is token-priced: settled from the reported usage
	price  estimate.Price
	model  string
	hold   int64 // micro-dollars reserved against the budgets
	tokens int64 // tokens reserved against the TPM limits
	// addedUsage: the gateway asked for the stream's usage chunk, not the
	// caller, so the caller must not see it (usage.Tap.DropUsageChunk).
	addedUsage bool
	// What the reported usage is judged against (implausible): the output ceiling
	// times the completions asked for, and the inflated body's size.
	maxOutput, bodyBytes int64
	// What fitting the hold to a budget needs: the body as it will be sent (inflated),
	// the output cap's fields, the cap as asked (or the model's maximum), the input
	// estimate and the completions asked for.
	decoded             []byte
	capFields           []string
	capField            string // the cap's field as the body names it (or would)
	capSet              bool   // the body sets a cap
	outCap, in, choices int64
}

// unmeteredHold is reserved for a write to a paid route whose endpoint has no
// token price (batches, files): it is released at settle, but it
// makes a member whose budget is spent get refused there too.
const unmeteredHold = 1

// meterRequest reads the (bounded, already read) body to estimate the request's
// worst-case cost. It may rewrite the body: a streamed OpenAI chat request without
// stream_options.include_usage gets it, so the stream carries its usage.
func (g *Gateway) meterRequest(r *http.Request, body []byte, route Route, rest string, snap *Snapshot) (meter, *Error) {
	m := meter{paid: route.Dialect == DialectAnthropic || route.Dialect == DialectOpenAI}
	if !m.paid {
		return m, nil
	}
	upstreamPath := strings.TrimSuffix(route.Targets[0].Upstream.EscapedPath(), "/") + rest
	if free(route.Dialect, r.Method, upstreamPath) {
		return meter{}, nil
	}
	m.kind = usage.KindFor(string(route.Dialect), r.Method, upstreamPath)
	kind, ok := estimateKinds[m.kind]
	if !ok {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
			m.hold = unmeteredHold
		}
		return m, nil
	}
	decoded, err := estimate.Decode(r.Header.Get("Content-Encoding"), body, g.opts.MaxInflatedBytes)
	if err != nil {
		return m, bodyError(err)
	}
	req, err := estimate.Parse(kind, decoded)
	if err != nil {
		return m, bodyError(err)
	}
	price, err := snap.Prices.Lookup(req.Model)
	if err != nil {
		return m, &Error{Kind: KindInvalidRequest, Message: err.Error()}
	}
	if m.hold, err = price.HoldFor(req); err != nil {
		return m, bodyError(err)
	}
	out := req.MaxOutputTokens
	if out == 0 && kind != estimate.OpenAIEmbeddings {
		out = price.MaxOutputTokens
	}
	m.priced, m.price, m.model = true, price, req.Model
	m.maxOutput, m.bodyBytes = out*max(req.Choices, 1), int64(len(decoded))
	m.decoded, m.outCap, m.in, m.choices = decoded, out, req.InputTokens, max(req.Choices, 1)
	m.capFields, m.capField, m.capSet = capFields[kind], req.MaxOutputField, req.MaxOutputTokens > 0
	m.tokens = min(req.InputTokens+m.maxOutput, limiter.MaxTokens)

	if kind == estimate.OpenAIChat && req.Stream && !req.IncludeUsage {
		injected, changed, err := usage.InjectIncludeUsage(decoded)
		if err != nil {
			return m, &Error{Kind: KindInvalidRequest, Message: "could not add stream_options.include_usage: " + err.Error()}
		}
		if changed {
			// Sent as decoded JSON: recompressing would gain nothing on loopback-to-provider
			// bodies this size, and the provider accepts either.
			setBody(r, injected)
			r.Header.Del("Content-Encoding")
			m.addedUsage, m.decoded = true, injected
		}
	}
	// The usage is read from the response as it passes: it must not arrive compressed.
	r.Header.Set("Accept-Encoding", "identity")
	return m, nil
}

// free says the provider never charges for the endpoint: Anthropic's token
// counting. It is admitted like any request (rate limits and cut-offs bind)
// but holds nothing, is never charged and writes no ledger row, so counting a
// prompt before sending it costs a member nothing, as it does at the provider.
func free(dialect Dialect, method, upstreamPath string) bool {
	return dialect == DialectAnthropic && method == http.MethodPost && strings.HasSuffix(upstreamPath, "/v1/messages/count_tokens")
}

// capFields are the output cap's fields per endpoint, the one to add first: fitting
// lowers every one the body sets (OpenAI chat takes the deprecated max_tokens too).
var capFields = map[estimate.Kind][]string{
	estimate.AnthropicMessages: {"max_tokens"},
	estimate.OpenAIChat:        {"max_completion_tokens", "max_tokens"},
	estimate.OpenAIResponses:   {"max_output_tokens"},
	estimate.OpenAICompletions: {"max_tokens"},
}

// FitFloorTokens is the smallest output cap fitting lowers a request to: below it
// an agent's turn is rarely useful, so the request is refused instead.
const FitFloorTokens = 1024

// fitFloor is the hold of the request at the smallest cap fitting may give it; 0
// when it cannot be fitted (not token-priced, or its cap is already that small).
func (m *meter) fitFloor() int64 {
	if !m.priced || m.capFields == nil || m.outCap <= FitFloorTokens {
		return 0
	}
	return m.price.Hold(m.in, FitFloorTokens*m.choices)
}

// fit lowers the request's output cap to the largest whose hold is within the
// hold the limiter placed, rewrites the body to say so and returns the cap.
func (m *meter) fit(r *http.Request, held int64) (int64, error) {
	lo, hi := int64(FitFloorTokens), m.outCap-1 // Hold(lo) <= held < Hold(outCap)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if m.price.Hold(m.in, mid*m.choices) <= held {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	body, err := usage.LowerOutputCap(m.decoded, m.capFields, lo)
	if err != nil {
		return 0, err
	}
	setBody(r, body)
	r.Header.Del("Content-Encoding")
	m.decoded, m.hold, m.maxOutput, m.bodyBytes = body, held, lo*m.choices, int64(len(body))
	return lo, nil
}

var estimateKinds = map[usage.Kind]estimate.Kind{
	usage.AnthropicMessages: estimate.AnthropicMessages,
	usage.OpenAIChat:        estimate.OpenAIChat,
	usage.OpenAIResponses:   estimate.OpenAIResponses,
	usage.OpenAIEmbeddings:  estimate.OpenAIEmbeddings,
	usage.OpenAICompletions: estimate.OpenAICompletions,
}

func bodyError(err error) *Error {
	switch estimate.HTTPStatus(err) {
	case http.StatusRequestEntityTooLarge:
		return &Error{Kind: KindTooLarge, Message: err.Error()}
	case http.StatusUnsupportedMediaType:
		return &Error{Kind: KindInvalidRequest, Status: http.StatusUnsupportedMediaType, Message: err.Error()}
	}
	return &Error{Kind: KindInvalidRequest, Message: err.Error()}
}

func setBody(r *http.Request, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}

// settle decides what the request really cost, from the usage the provider
// reported, queues the limiter's SETTLE to run after the response (g.settles)
// when it has something to settle,
// and records the ledger row. It runs detached from the request's context: a
// client hanging up must not skip it.
func (g *Gateway) settle(r *http.Request, t *target, epoch int64, o *Outcome) {
	// The ledger never blocks; the settle queue blocks only when it is full.
	ctx := context.WithoutCancel(r.Context())
	status, cost, tokens, used := t.outcome()
	o.UpstreamStatus, o.TTFB, o.CostMicros, o.LedgerStatus, o.Usage = t.status, t.ttfb, cost, status, used
	o.UpstreamError = t.failed
	if t.settles {
		g.settles.add(ctx, limiter.Settlement{Team: t.team(), Member: t.member(), RequestID: t.requestID,
			Cost: cost, Tokens: tokens, Epoch: epoch})
	}
	if !t.meter.paid {
		return
	}
	e := t.ledgerEntry(status, cost)
	e.Usage = used
	e.HTTPStatus = t.status
	e.SettledAt = g.opts.Now().UTC()
	g.opts.Ledger.Record(e)
}

// outcome decides the charge: the reported usage when the provider gave it; the
// usage seen so far when a stream broke after carrying some; the whole hold when
// the request reached the upstream and nothing says what it cost, or what it says
// is implausible for the request; nothing when it provably never reached the
// upstream, or the provider answered with an error status, whatever usage that
// error carried (providers bill neither a refused request, 4xx, nor one that failed
// before it started, 5xx and 529; a stream that fails after its 200 is charged).
func (t *target) outcome() (status LedgerStatus, cost, tokens int64, used usage.Usage) {
	if !t.meter.priced {
		return LedgerSettled, 0, 0, used
	}
	if t.tap != nil {
		u, seen, final := t.tap.Result()
		switch {
		case t.status >= 400:
			return LedgerReleased, 0, 0, used
		case seen && t.meter.implausible(u) != "":
			return LedgerImplausible, t.meter.hold, t.meter.tokens, bounded(u)
		case seen && final:
			return LedgerSettled, CostOf(t.meter.price, u), tokensOf(u), u
		case seen:
			return LedgerUncertain, CostOf(t.meter.price, u), tokensOf(u), u
		}
		return LedgerUncertain, t.meter.hold, t.meter.tokens, u
	}
	if !t.sent.Load() {
		return LedgerReleased, 0, 0, used
	}
	return LedgerUncertain, t.meter.hold, t.meter.tokens, used
}

// CostOf is what reported usage costs at price: the cache writes split into the
// two priced lifetimes, rounded up once (estimate.Price.Cost).
func CostOf(price estimate.Price, u usage.Usage) int64 {
	return price.Cost(estimate.Usage{InputTokens: u.InputTokens, CacheWriteTokens: u.CacheWriteTokens - u.CacheWrite1hTokens,
		CacheWrite1hTokens: u.CacheWrite1hTokens, CacheReadTokens: u.CacheReadTokens, OutputTokens: u.OutputTokens})
}

func tokensOf(u usage.Usage) int64 {
	return min(u.InputTokens+u.CacheWriteTokens+u.CacheReadTokens+u.OutputTokens, limiter.MaxTokens)
}

func (t *target) team() string   { return strconv.FormatInt(t.key.TeamID, 10) }
func (t *target) member() string { return strconv.FormatInt(t.key.MemberID, 10) }

func (t *target) ledgerEntry(status LedgerStatus, cost int64) LedgerEntry {
	return LedgerEntry{TeamID: t.key.TeamID, MemberID: t.key.MemberID, KeyID: t.key.ID, RouteID: t.route.ID,
		RequestID: t.requestID, Model: t.meter.model, Status: status, HeldMicros: t.meter.hold, CostMicros: cost,
		CreatedAt: t.start, Epoch: t.teamEpoch, Seq: t.seq}
}

// holdMeta is stored with a hold so that, if this replica dies before settling,
// whoever sweeps the expired hold can write its ledger row.
func holdMeta(t *target) string { return HoldMeta(t.key.MemberID, t.key.ID, t.route.ID, t.meter.model) }

// HoldMeta is the meta of a hold (limiter.Request.Meta): member|key|route|model,
// which recordExpired reads back.
func HoldMeta(memberID int64, keyID string, routeID int64, model string) string {
	b := make([]byte, 0, 48+len(keyID)+len(model))
	b = strconv.AppendInt(b, memberID, 10)
	b = append(append(append(b, '|'), keyID...), '|')
	b = strconv.AppendInt(b, routeID, 10)
	b = append(append(b, '|'), model...)
	return string(b)
}

// recordExpired writes the ledger rows of holds another replica left behind: they
// were charged in full, so they are uncertain, in the counters' epoch the sweep ran in.
func (g *Gateway) recordExpired(teamID int64, expired []limiter.ExpiredHold, epoch int64) {
	now := g.opts.Now().UTC()
	for _, h := range expired {
		parts := strings.SplitN(h.Meta, "|", 4)
		if len(parts) != 4 {
			continue
		}
		member, _ := strconv.ParseInt(parts[0], 10, 64)
		route, _ := strconv.ParseInt(parts[2], 10, 64)
		g.opts.Ledger.Record(LedgerEntry{TeamID: teamID, MemberID: member, KeyID: parts[1], RouteID: route, Model: parts[3],
			RequestID: h.RequestID, Status: LedgerUncertain, HeldMicros: h.Hold, CostMicros: h.Hold, CreatedAt: now, SettledAt: now,
			Epoch: epoch})
	}
}

// budgetRefusal words a 402 so the member knows what the request would have held
// and why, how much of which budget is left (not spent: in-flight holds count), and
// when it comes back. limit is that budget's limit.
func budgetRefusal(d limiter.Decision, m *meter, limit int64, fits bool) *Error {
	whose := "your"
	if d.BudgetScope == limiter.ScopeTeam {
		whose = "your team's"
	}
	resets := "it does not reset; ask a team owner"
	if !d.BudgetResetsAt.IsZero() {
		resets = "it resets at " + d.BudgetResetsAt.UTC().Format(time.RFC3339)
	}
	held := fmt.Sprintf("this request would hold up to %s%s until it is settled at its real cost", dollars(m.hold), m.why(m.outCap))
	if floor := m.fitFloor(); fits && floor > 0 {
		held = fmt.Sprintf("even lowered to %s %d, this request would hold up to %s at %s prices", m.capField, FitFloorTokens,
			dollars(floor), m.model)
	}
	if d.TooLarge {
		return &Error{Kind: KindBudget, Message: fmt.Sprintf("%s, more than %s whole budget of %s; lower %s",
			held, whose, dollars(limit), cmp.Or(m.capField, "max_tokens"))}
	}
	return &Error{Kind: KindBudget, Message: fmt.Sprintf("%s; %s of %s budget of %s is left (spent and held by requests in flight count); %s",
		held, dollars(max(d.BudgetRemaining, 0)), whose, dollars(limit), resets)}
}

// why says what a hold is made of: the output cap at the model's prices.
func (m *meter) why(outCap int64) string {
	switch {
	case !m.priced:
		return ""
	case m.capField == "":
		return " (" + m.model + " prices)"
	case !m.capSet:
		return fmt.Sprintf(" (no %s: the model's maximum, %d, at %s prices)", m.capField, outCap, m.model)
	}
	return fmt.Sprintf(" (%s %d at %s prices)", m.capField, outCap, m.model)
}

// dollars formats micro-dollars exactly, e.g. 1234567 → $1.234567.
func dollars(micros int64) string {
	return fmt.Sprintf("$%d.%06d", micros/1_000_000, micros%1_000_000)
}
