package proxy

import (
	"time"

	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy/usage"
)

// LedgerStatus is where a request's charge stands.
type LedgerStatus string

// Ledger statuses: held at admission; then settled from the provider's usage,
// uncertain (charged the hold, or the usage seen so far, because the outcome is
// unknown), implausible (the provider reported usage the request cannot have had:
// charged the hold, and a security event), or released (provably never reached the
// upstream, or the provider answered with an error: charged nothing).
const (
	LedgerHeld        LedgerStatus = "held"
	LedgerSettled     LedgerStatus = "settled"
	LedgerUncertain   LedgerStatus = "uncertain"
	LedgerImplausible LedgerStatus = "implausible"
	LedgerReleased    LedgerStatus = "released"
)

// MaxRequestMicros is the most one request is ever charged ($1,000,000, hundreds of
// times the dearest real request): reported usage that would cost more is
// implausible, and a ledger row that says it cost more (or less than 0), written
// before that rule or by hand, counts its hold in every sum instead.
const MaxRequestMicros = 1_000_000_000_000

// AddSpend is a + b for sums of micro-dollars over ledger rows, each term taken in
// 0..limiter.MaxMoney and the sum saturated there: no row, however absurd, can wrap
// a sum or make one the limiter refuses.
func AddSpend(a, b int64) int64 {
	clamp := func(v int64) int64 { return min(max(v, 0), limiter.MaxMoney) }
	return min(clamp(a)+clamp(b), limiter.MaxMoney)
}

// LedgerEntry is one admitted request's row; the gateway records it when the
// hold is placed and again when it settles.
type LedgerEntry struct {
	TeamID, MemberID int64
	KeyID            string
	RouteID          int64
	RequestID        string // gateway-generated, unique per team
	Model            string
	Status           LedgerStatus
	HTTPStatus       int // 0 until the upstream answered
	Usage            usage.Usage
	HeldMicros       int64
	CostMicros       int64
	CreatedAt        time.Time
	SettledAt        time.Time // zero while held
	// Epoch and Seq are the generation of the team's admission counters the
	// request was admitted in (limiter.Decision's TeamEpoch and Seq; 0 when none
	// counted it): a rebuild that could not see the row is told to count it,
	// and Postgres keeps the newest as the team's watermark.
	Epoch, Seq int64
}

// Ledger receives ledger entries; the app writes them to Postgres in batches.
type Ledger interface {
	// Record queues an entry without blocking the request.
	Record(LedgerEntry)
	// Healthy is false when entries cannot be made durable (Postgres down for too
	// long); paid admissions then fail closed.
	Healthy() bool
}

type discardLedger struct{}

func (discardLedger) Record(LedgerEntry) {}
func (discardLedger) Healthy() bool      { return true }
