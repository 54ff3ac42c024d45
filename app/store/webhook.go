package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
)

// Webhook formats.
const (
	// WebhookSlack posts {"text": ...}: Slack's incoming webhooks, and the many
	// chat tools that accept the same body.
	WebhookSlack = "slack"
	// WebhookSigned posts the event as JSON, signed as the Standard Webhooks
	// specification says (webhook-id, webhook-timestamp, webhook-signature).
	WebhookSigned = "signed"
)

// The alert events a webhook receives.
const (
	EventBudgetRequested = "budget.requested"
	EventBudgetThreshold = "budget.threshold"
	EventMemberCutOff    = "member.cut_off"
	EventKeyNewPlace     = "key.new_place"
	EventSecurity        = "security.event"
	EventWebhookTest     = "webhook.test"
)

// Audit actions of webhooks.
const (
	ActionWebhookCreate = "webhook.create"
	ActionWebhookDelete = "webhook.delete"
)

// Webhook is where a team's alerts are posted. Secret is set only in the
// answer to its creation: it is shown once.
type Webhook struct {
	ID        int64     `json:"id"`
	TeamID    int64     `json:"team_id"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Format    string    `json:"format"`
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Last is the latest delivery to it, if any.
	Last *WebhookDelivery `json:"last_delivery,omitempty"`
}

// WebhookDelivery is the state of one event's delivery to one webhook.
type WebhookDelivery struct {
	Event       string     `json:"event"`
	Attempts    int        `json:"attempts"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	// FailedAt is set when the attempts ran out.
	FailedAt  *time.Time `json:"failed_at,omitempty"`
	LastError string     `json:"last_error,omitempty"`
}

// Event is one alert: what happened, in a sentence for a person (the Slack
// text) and as data for a program (the signed body's "data").
type Event struct {
	Type string         `json:"type"`
	At   time.Time      `json:"timestamp"`
	Text string         `json:"text"`
	Data map[string]any `json:"data"`
}

// NewEventID is a Standard Webhooks message id, unique per event.
func NewEventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "msg_" + hex.EncodeToString(b)
}

// CreateWebhook saves a webhook of teamID, its URL checked by the outbound
// guard (a metadata address or the gateway's own listener is refused now, and
// again at every delivery), with a new signing secret.
func (s *Store) CreateWebhook(ctx context.Context, actor Actor, teamID int64, name, url, format string) (Webhook, error) {
	name = strings.TrimSpace(name)
	if err := checkText("name", "name", name); err != nil {
		return Webhook{}, err
	}
	if name == "" || len(name) > 100 {
		return Webhook{}, invalid("name", "name is required, at most 100 characters")
	}
	if format != WebhookSlack && format != WebhookSigned {
		return Webhook{}, invalid("format", "format must be %s or %s, not %q", WebhookSlack, WebhookSigned, format)
	}
	url = strings.TrimSpace(url)
	if len(url) > 2000 {
		return Webhook{}, invalid("url", "URL must be at most 2000 characters")
	}
	if _, err := s.outbound.CheckURL(ctx, url); err != nil {
		return Webhook{}, invalid("url", "webhook %v", err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	var w Webhook
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.WebhookCreate(ctx, tx, db.WebhookCreateParams{TeamID: teamID, Name: name, Url: url, Format: format,
			Secret: "whsec_" + base64.StdEncoding.EncodeToString(key)})
		if err != nil {
			return mapErr(err)
		}
		w = Webhook{ID: row.ID, TeamID: row.TeamID, Name: row.Name, URL: row.Url, Format: row.Format, CreatedAt: row.CreatedAt}
		if err := s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionWebhookCreate, target: name, after: w}); err != nil {
			return err
		}
		w.Secret = row.Secret
		return nil
	})
	if err != nil {
		return Webhook{}, fmt.Errorf("store: create webhook %q: %w", name, err)
	}
	return w, nil
}

// Webhooks lists teamID's webhooks, without their secrets, each with its
// latest delivery.
func (s *Store) Webhooks(ctx context.Context, teamID int64) ([]Webhook, error) {
	rows, err := s.q.WebhookList(ctx, s.pool, teamID)
	if err != nil {
		return nil, fmt.Errorf("store: list webhooks: %w", err)
	}
	out := make([]Webhook, len(rows))
	for i, r := range rows {
		out[i] = Webhook{ID: r.ID, TeamID: r.TeamID, Name: r.Name, URL: r.Url, Format: r.Format, CreatedAt: r.CreatedAt}
		if r.LastEvent != "" {
			d := &WebhookDelivery{Event: r.LastEvent, Attempts: int(r.LastAttempts), DeliveredAt: r.LastDeliveredAt, FailedAt: r.LastFailedAt}
			if r.LastError != nil {
				d.LastError = *r.LastError
			}
			out[i].Last = d
		}
	}
	return out, nil
}

// DeleteWebhook removes a webhook and the deliveries still queued for it.
func (s *Store) DeleteWebhook(ctx context.Context, actor Actor, teamID, id int64) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		row, err := s.q.WebhookDelete(ctx, tx, db.WebhookDeleteParams{TeamID: teamID, ID: id})
		if err != nil {
			return mapErr(err)
		}
		return s.audit(ctx, tx, actor, auditEntry{teamID: &teamID, action: ActionWebhookDelete, target: row.Name,
			before: Webhook{ID: row.ID, TeamID: row.TeamID, Name: row.Name, URL: row.Url, Format: row.Format, CreatedAt: row.CreatedAt}})
	})
	if err != nil {
		return fmt.Errorf("store: delete webhook %d: %w", id, err)
	}
	return nil
}

// TestWebhook queues a test event to one webhook of teamID.
func (s *Store) TestWebhook(ctx context.Context, teamID, id int64) error {
	if _, err := s.q.WebhookGet(ctx, s.pool, db.WebhookGetParams{TeamID: teamID, ID: id}); err != nil {
		return fmt.Errorf("store: test webhook %d: %w", id, mapErr(err))
	}
	ev := Event{Type: EventWebhookTest, Text: "tollgate: a test alert; this webhook works.", Data: map[string]any{}}
	return s.enqueue(ctx, s.pool, teamID, &id, NewEventID(), ev)
}

// Alert queues ev to every webhook of teamID, once per mark: of every caller
// on every replica that alerts with the same non-empty mark (e.g. "budget 80%
// member 7 period 2026-12-01"), the first queues it and the rest do nothing.
func (s *Store) Alert(ctx context.Context, teamID int64, mark string, ev Event) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if mark != "" {
			n, err := s.q.AlertMarkInsert(ctx, tx, db.AlertMarkInsertParams{TeamID: teamID, Mark: mark})
			if err != nil || n == 0 {
				return err
			}
		}
		return s.enqueue(ctx, tx, teamID, nil, NewEventID(), ev)
	})
	if err != nil {
		return fmt.Errorf("store: alert %s: %w", ev.Type, err)
	}
	return nil
}

// enqueue queues ev to teamID's webhooks (only webhookID's when set) on q,
// the transaction of the write the event reports where there is one.
func (s *Store) enqueue(ctx context.Context, q db.DBTX, teamID int64, webhookID *int64, eventID string, ev Event) error {
	if ev.At.IsZero() {
		ev.At = time.Now().UTC()
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = s.q.WebhookDeliveryEnqueue(ctx, q, db.WebhookDeliveryEnqueueParams{EventID: eventID, EventType: ev.Type,
		Payload: payload, TeamID: teamID, WebhookID: webhookID})
	return err
}

// WebhookTeams lists the teams with at least one webhook.
func (s *Store) WebhookTeams(ctx context.Context) ([]int64, error) {
	return s.q.WebhookTeamsWithAny(ctx, s.pool)
}

// Delivery is one leased delivery of one event to one webhook.
type Delivery struct {
	ID        int64
	EventID   string
	Type      string
	Payload   json.RawMessage
	Attempts  int
	URL       string
	Format    string
	Secret    string
	CreatedAt time.Time
}

// ClaimDeliveries leases up to max due deliveries to the caller for lease:
// no other replica claims them until it ends.
func (s *Store) ClaimDeliveries(ctx context.Context, max int, lease time.Duration) ([]Delivery, error) {
	rows, err := s.q.WebhookDeliveryClaim(ctx, s.pool, db.WebhookDeliveryClaimParams{Max: int32(max), LeaseSeconds: lease.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = Delivery{ID: r.ID, EventID: r.EventID, Type: r.EventType, Payload: r.Payload, Attempts: int(r.Attempts),
			URL: r.Url, Format: r.Format, Secret: r.Secret, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// DeliveryDone records a delivery the receiver accepted.
func (s *Store) DeliveryDone(ctx context.Context, id int64) error {
	return s.q.WebhookDeliveryDone(ctx, s.pool, id)
}

// DeliveryFailed records a failed attempt: tried again after backoff, or
// given up once maxAttempts were made.
func (s *Store) DeliveryFailed(ctx context.Context, id int64, failure string, backoff time.Duration, maxAttempts int) error {
	return s.q.WebhookDeliveryRetry(ctx, s.pool, db.WebhookDeliveryRetryParams{ID: id, LastError: &failure,
		BackoffSeconds: backoff.Seconds(), MaxAttempts: int32(maxAttempts)})
}

// Mark records mark as done without alerting: a lower threshold passed over
// by a higher one.
func (s *Store) Mark(ctx context.Context, teamID int64, mark string) error {
	_, err := s.q.AlertMarkInsert(ctx, s.pool, db.AlertMarkInsertParams{TeamID: teamID, Mark: mark})
	return err
}
