package proxy

import (
	"time"

	"github.com/tollgate/tollgate/proxy/usage"
)

// LedgerStatus is where a request's charge stands.
type LedgerStatus string

// Ledger statuses: held at admission; then settled from the provider's usage,
// uncertain (charged the hold, or the usage seen so far, because the outcome is
// unknown), or released (provably never reached the upstream: charged nothing).
const (
	LedgerHeld      LedgerStatus = "held"
	LedgerSettled   LedgerStatus = "settled"
	LedgerUncertain LedgerStatus = "uncertain"
	LedgerReleased  LedgerStatus = "released"
)

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
