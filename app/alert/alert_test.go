package alert_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/alert"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
	"github.com/tollgate/tollgate/proxy/netguard"
)

const owner = store.ActorCLI

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver is a local webhook endpoint; answer picks each request's status.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int) int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{answer: func(int) int { return http.StatusOK }}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		status := r.answer(len(r.got))
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

type fixture struct {
	url    string
	st     *store.Store
	team   store.Team
	member store.Member
}

func setup(t *testing.T) *fixture {
	t.Helper()
	url := dbtest.Schema(t)
	f := &fixture{url: url, st: replicaStore(t, url)}
	ctx := t.Context()
	var err error
	if f.team, err = f.st.CreateTeam(ctx, owner, "acme"); err != nil {
		t.Fatal(err)
	}
	if f.member, err = f.st.AddMember(ctx, owner, f.team.ID, "alice@example.com", store.RoleMember); err != nil {
		t.Fatal(err)
	}
	return f
}

// replicaStore is a store on a pool of its own, as a replica has.
func replicaStore(t *testing.T, url string) *store.Store {
	return store.New(dbtest.Pool(t, url)).WithOutbound(apptest.Outbound())
}

func worker(st *store.Store) *alert.Worker {
	return alert.New(st, apptest.Outbound().Client(0), alert.Options{Backoff: 10 * time.Millisecond})
}

func (f *fixture) webhook(t *testing.T, name, url, format string) store.Webhook {
	t.Helper()
	w, err := f.st.CreateWebhook(t.Context(), owner, f.team.ID, name, url, format)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func deliver(t *testing.T, w *alert.Worker) int {
	t.Helper()
	n, err := w.DeliverDue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) budget(t *testing.T, dollars int64) {
	t.Helper()
	b := dollars * 1_000_000
	if _, err := f.st.SetMemberLimits(t.Context(), owner, f.team.ID, f.member.ID, store.Limits{Budget: &b, RatePeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
}

// verify checks a signed request as a receiver would, from the secret alone:
// HMAC-SHA256 over "id.timestamp.body", base64, after "v1,".
func verify(secret string, r received) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(r.header.Get("webhook-id") + "." + r.header.Get("webhook-timestamp") + "." + string(r.body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for sig := range strings.FieldsSeq(r.header.Get("webhook-signature")) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// TestBudgetRequestSlackAndSigned: a budget request reaches a Slack webhook as
// {"text": ...} and a signed one as the event, whose signature verifies with
// the secret shown at creation and fails with any other.
func TestBudgetRequestSlackAndSigned(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	slack, signed := newReceiver(t), newReceiver(t)
	f.webhook(t, "chat", slack.URL, store.WebhookSlack)
	hook := f.webhook(t, "ops", signed.URL+"/hook", store.WebhookSigned)
	if !strings.HasPrefix(hook.Secret, "whsec_") {
		t.Fatalf("secret %q", hook.Secret)
	}
	for _, w := range must(f.st.Webhooks(ctx, f.team.ID))(t) {
		if w.Secret != "" {
			t.Fatal("the list shows a secret: it is shown once, at creation")
		}
	}
	f.budget(t, 10)
	if _, err := f.st.RequestBudget(ctx, store.MemberActor(f.member.ID), f.team.ID, f.member.ID, 5_000_000, "eval run"); err != nil {
		t.Fatal(err)
	}
	if n := deliver(t, worker(f.st)); n != 2 {
		t.Fatalf("attempted %d deliveries; want 2", n)
	}
	s := slack.requests()
	var text map[string]string
	if len(s) != 1 || json.Unmarshal(s[0].body, &text) != nil || len(text) != 1 ||
		!strings.Contains(text["text"], "alice@example.com asks for $5.00 more budget: eval run") {
		t.Fatalf("slack got %q", s)
	}
	g := signed.requests()
	if len(g) != 1 {
		t.Fatalf("signed receiver got %d requests", len(g))
	}
	if err := verify(hook.Secret, g[0]); err != nil {
		t.Fatalf("signature: %v (headers %v)", err, g[0].header)
	}
	other := f.webhook(t, "other", signed.URL, store.WebhookSigned)
	if verify(other.Secret, g[0]) == nil {
		t.Fatal("another webhook's secret verifies the signature")
	}
	var ev store.Event
	if err := json.Unmarshal(g[0].body, &ev); err != nil || ev.Type != store.EventBudgetRequested || ev.Data["email"] != "alice@example.com" ||
		ev.Data["amount_micros"] != float64(5_000_000) {
		t.Fatalf("event %+v (%v)", ev, err)
	}
	if !strings.HasPrefix(g[0].header.Get("webhook-id"), "msg_") {
		t.Fatalf("webhook-id %q", g[0].header.Get("webhook-id"))
	}
}

// TestRetryAfterReceiverFails: a 500 is retried after backoff with the same
// webhook-id, and the failure shows as the webhook's last error until then.
func TestRetryAfterReceiverFails(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	r := newReceiver(t)
	r.answer = func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	hook := f.webhook(t, "ops", r.URL, store.WebhookSigned)
	if err := f.st.TestWebhook(ctx, f.team.ID, hook.ID); err != nil {
		t.Fatal(err)
	}
	w := alert.New(f.st, apptest.Outbound().Client(0), alert.Options{Backoff: 500 * time.Millisecond})
	deliver(t, w)
	last := must(f.st.Webhooks(ctx, f.team.ID))(t)[0].Last
	if last == nil || last.DeliveredAt != nil || !strings.Contains(last.LastError, "500") {
		t.Fatalf("after a 500: last delivery %+v", last)
	}
	if n := deliver(t, w); n != 0 {
		t.Fatalf("retried %d at once, before its backoff", n)
	}
	time.Sleep(600 * time.Millisecond)
	deliver(t, w)
	got := r.requests()
	if len(got) != 2 || got[0].header.Get("webhook-id") != got[1].header.Get("webhook-id") {
		t.Fatalf("receiver got %d requests", len(got))
	}
	last = must(f.st.Webhooks(ctx, f.team.ID))(t)[0].Last
	if last.DeliveredAt == nil || last.LastError != "" || last.Attempts != 2 {
		t.Fatalf("after the 200: last delivery %+v", last)
	}
}

// TestRetriesAreBounded: a receiver that always fails gets MaxAttempts tries,
// then the delivery is given up and shown as failed.
func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	r := newReceiver(t)
	r.answer = func(int) int { return http.StatusBadGateway }
	hook := f.webhook(t, "ops", r.URL, store.WebhookSlack)
	must(0, f.st.TestWebhook(ctx, f.team.ID, hook.ID))(t)
	w := alert.New(f.st, apptest.Outbound().Client(0), alert.Options{Backoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxAttempts: 3})
	for range 10 {
		deliver(t, w)
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(r.requests()); n != 3 {
		t.Fatalf("receiver got %d attempts; want 3", n)
	}
	if last := must(f.st.Webhooks(ctx, f.team.ID))(t)[0].Last; last.FailedAt == nil {
		t.Fatalf("last delivery %+v: not given up", last)
	}
}

// TestOneDeliveryAcrossReplicas: two replicas' workers draining the same
// queue at once send each event exactly once.
func TestOneDeliveryAcrossReplicas(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	r := newReceiver(t)
	hook := f.webhook(t, "ops", r.URL, store.WebhookSigned)
	const events = 40
	for range events {
		must(0, f.st.TestWebhook(ctx, f.team.ID, hook.ID))(t)
	}
	workers := []*alert.Worker{worker(replicaStore(t, f.url)), worker(replicaStore(t, f.url))}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			if _, err := w.DeliverDue(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, g := range r.requests() {
		seen[g.header.Get("webhook-id")]++
	}
	if len(seen) != events {
		t.Fatalf("%d distinct events delivered; want %d", len(seen), events)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
}

// TestGuardRefusesMetadataURL: a metadata address is refused when saved, and
// a stored one (saved before a guard change) is refused when dialled.
func TestGuardRefusesMetadataURL(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	_, err := f.st.CreateWebhook(ctx, owner, f.team.ID, "meta", "http://169.254.169.254/latest/meta-data/", store.WebhookSlack)
	var v *store.ValidationError
	if !errors.As(err, &v) || v.Field != "url" {
		t.Fatalf("save: %v; want a validation error on url", err)
	}
	// A receiver on loopback is allowed when saved, then the dialling
	// replica's guard does not allow loopback.
	r := newReceiver(t)
	hook := f.webhook(t, "ops", r.URL, store.WebhookSlack)
	must(0, f.st.TestWebhook(ctx, f.team.ID, hook.ID))(t)
	strict := alert.New(f.st, netguard.New(netguard.Options{}).Client(0), alert.Options{})
	deliver(t, strict)
	if n := len(r.requests()); n != 0 {
		t.Fatalf("receiver got %d requests through a guard that refuses loopback", n)
	}
	if last := must(f.st.Webhooks(ctx, f.team.ID))(t)[0].Last; last == nil || !strings.Contains(last.LastError, "refuses") &&
		!strings.Contains(last.LastError, "loopback") {
		t.Fatalf("last delivery %+v; want the guard's refusal", last)
	}
}

// TestBudgetCrossingsFireOnce: 80% and then 100% of a member's budget each
// alert once, however many replicas check how often.
func TestBudgetCrossingsFireOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	r := newReceiver(t)
	f.webhook(t, "chat", r.URL, store.WebhookSlack)
	f.budget(t, 10)
	key := must(f.st.IssueKey(ctx, owner, f.team.ID, f.member.ID, "laptop"))(t)
	spend := func(id string, micros int64) {
		t.Helper()
		now := time.Now().UTC()
		if err := f.st.WriteLedger(ctx, []proxy.LedgerEntry{{TeamID: f.team.ID, MemberID: f.member.ID, KeyID: key.ID, RequestID: id,
			Model: "m", Status: proxy.LedgerSettled, CostMicros: micros, CreatedAt: now, SettledAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	replicas := []*alert.Worker{worker(replicaStore(t, f.url)), worker(replicaStore(t, f.url))}
	check := func() []string {
		t.Helper()
		for range 2 {
			for _, w := range replicas {
				if err := w.CheckBudgets(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		deliver(t, replicas[0])
		var texts []string
		for _, g := range r.requests() {
			var m map[string]string
			_ = json.Unmarshal(g.body, &m)
			texts = append(texts, m["text"])
		}
		return texts
	}
	spend("a", 7_000_000)
	if got := check(); len(got) != 0 {
		t.Fatalf("at 70%%: %q", got)
	}
	spend("b", 1_500_000)
	got := check()
	if len(got) != 1 || !strings.Contains(got[0], "alice@example.com's budget is 80% spent: $8.50 of $10.00") {
		t.Fatalf("at 85%%: %q", got)
	}
	spend("c", 2_000_000)
	got = check()
	if len(got) != 2 || !strings.Contains(got[1], "alice@example.com's budget is 100% spent") {
		t.Fatalf("at 105%%: %q", got)
	}
	if got := check(); len(got) != 2 {
		t.Fatalf("checked again: %q", got)
	}
}

// TestCutOffAlerts: cutting a member off alerts once; restoring them does not.
func TestCutOffAlerts(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	r := newReceiver(t)
	f.webhook(t, "chat", r.URL, store.WebhookSlack)
	must(f.st.SetMemberStatus(ctx, owner, f.team.ID, f.member.ID, store.StatusDisabled))(t)
	must(f.st.SetMemberStatus(ctx, owner, f.team.ID, f.member.ID, store.StatusActive))(t)
	deliver(t, worker(f.st))
	got := r.requests()
	if len(got) != 1 || !strings.Contains(string(got[0].body), "alice@example.com was cut off by cli") {
		t.Fatalf("receiver got %d requests: %q", len(got), got)
	}
}

func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
