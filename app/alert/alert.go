// Package alert delivers a team's alerts to its webhooks. Events are queued in
// Postgres (store.Alert, or in the transaction of the write they report); a
// Worker on every replica claims due deliveries with FOR UPDATE SKIP LOCKED
// under a lease, posts them through the outbound guard, and retries a failure
// with exponential backoff up to a bound. It also watches budgets and queues
// their 80% and 100% crossings.
package alert

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// Options tune a Worker; zero fields take the defaults.
type Options struct {
	Logger *slog.Logger
	// Interval is how often the queue is polled (default 2s).
	Interval time.Duration
	// BudgetInterval is how often budgets are checked for crossings (default 30s).
	BudgetInterval time.Duration
	// Backoff is the wait after the first failure, doubled after each further
	// one up to MaxBackoff (defaults 10s and 1h).
	Backoff, MaxBackoff time.Duration
	// MaxAttempts bounds the attempts per delivery (default 10: about 2h of retries).
	MaxAttempts int
	// Timeout bounds one attempt (default 10s); the lease is twice it.
	Timeout time.Duration
}

// Worker delivers the queued alerts.
type Worker struct {
	st     *store.Store
	client *http.Client
	o      Options
}

// New returns a Worker posting with client, which must be the outbound
// guard's (App.Outbound().Client): webhook URLs are owners' input.
func New(st *store.Store, client *http.Client, o Options) *Worker {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.BudgetInterval <= 0 {
		o.BudgetInterval = 30 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = 10 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Hour
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	return &Worker{st: st, client: client, o: o}
}

// Run delivers and watches budgets until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	deliver := time.NewTicker(w.o.Interval)
	defer deliver.Stop()
	budgets := time.NewTicker(w.o.BudgetInterval)
	defer budgets.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-deliver.C:
			// A full batch may have more behind it.
			for n := batch; n == batch; {
				var err error
				if n, err = w.DeliverDue(ctx); err != nil {
					if ctx.Err() == nil {
						w.o.Logger.Warn("alerts: delivery", "err", err)
					}
					break
				}
			}
		case <-budgets.C:
			if err := w.CheckBudgets(ctx); err != nil && ctx.Err() == nil {
				w.o.Logger.Warn("alerts: budget check", "err", err)
			}
		}
	}
}

// batch is how many deliveries one claim leases.
const batch = 50

// DeliverDue claims one batch of due deliveries and attempts each once. It
// returns how many were attempted.
func (w *Worker) DeliverDue(ctx context.Context) (int, error) {
	claimed, err := w.st.ClaimDeliveries(ctx, batch, 2*w.o.Timeout)
	if err != nil {
		return 0, err
	}
	for _, d := range claimed {
		if err := w.post(ctx, d); err != nil {
			w.o.Logger.Info("alerts: webhook delivery failed", "event", d.Type, "event_id", d.EventID, "attempt", d.Attempts, "err", err)
			if err := w.st.DeliveryFailed(ctx, d.ID, err.Error(), w.backoff(d.Attempts), w.o.MaxAttempts); err != nil {
				return len(claimed), err
			}
			continue
		}
		if err := w.st.DeliveryDone(ctx, d.ID); err != nil {
			return len(claimed), err
		}
	}
	return len(claimed), nil
}

// backoff is the wait after the attempt-th failure.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.o.Backoff
	for i := 1; i < attempt && d < w.o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, w.o.MaxBackoff)
}

// post makes one attempt: any 2xx is delivered.
func (w *Worker) post(ctx context.Context, d store.Delivery) error {
	body, header, err := Render(d, time.Now())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = header
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}

// Render is the request a delivery makes at now: its body and headers.
func Render(d store.Delivery, now time.Time) ([]byte, http.Header, error) {
	var ev store.Event
	if err := json.Unmarshal(d.Payload, &ev); err != nil {
		return nil, nil, fmt.Errorf("alerts: event %s: %w", d.EventID, err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"tollgate-webhooks"}}
	if d.Format == store.WebhookSlack {
		body, err := json.Marshal(map[string]string{"text": ev.Text})
		return body, h, err
	}
	body := []byte(d.Payload)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := Sign(d.Secret, d.EventID, ts, body)
	if err != nil {
		return nil, nil, err
	}
	h.Set("webhook-id", d.EventID)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", sig)
	return body, h, nil
}

// Sign is the Standard Webhooks signature of body: "v1," and the base64
// HMAC-SHA256 of "id.timestamp.body" under the secret's key (the base64
// after "whsec_").
func Sign(secret, id, timestamp string, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", errors.New("alerts: webhook secret is not whsec_<base64>")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}
