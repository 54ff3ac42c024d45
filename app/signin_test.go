package app_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

const signInPassword = "correct-horse-battery-staple-7"

// withPassword gives the fixture's member ada a console password.
func (f *fixture) withPassword(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	token, _, err := f.st.CreateInvite(ctx, store.ActorCLI, f.team.ID, f.member.Email, store.RoleMember)
	must(t, err)
	_, err = f.st.AcceptInvite(ctx, token, signInPassword)
	must(t, err)
}

// signInRequest is a console sign-in form post to base, with extra headers.
func signInRequest(t *testing.T, base, email, password string, headers ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/console/signin",
		strings.NewReader(url.Values{"email": {email}, "password": {password}}.Encode()))
	must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// guessAtOnce sends n wrong passwords for email at once, spread over the
// replicas, and counts the answers by status; every 429 must carry Retry-After.
func guessAtOnce(t *testing.T, n int, email string, replicas ...*apptest.Replica) map[int]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		req := signInRequest(t, replicas[i%len(replicas)].URL, email, "wrong-guess-number-"+string(rune('a'+i%26)))
		wg.Go(func() {
			<-start
			r, err := send(req)
			if err != nil {
				t.Error(err)
				return
			}
			if r.status == http.StatusTooManyRequests && r.header.Get("Retry-After") == "" {
				t.Error("a 429 without Retry-After")
			}
			mu.Lock()
			counts[r.status]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return counts
}

// TestSignInGuessesAreThrottledAcrossReplicas (HOSTILE 55): thirty wrong
// passwords at once for one account, half to each of two replicas sharing
// Redis, get exactly the limit of ten 401s and twenty 429s; the right
// password is then refused too.
func TestSignInGuessesAreThrottledAcrossReplicas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withPassword(t)
	second := f.replica(t)

	counts := guessAtOnce(t, 30, f.member.Email, f.gw, second)
	if counts[http.StatusUnauthorized] != 10 || counts[http.StatusTooManyRequests] != 20 || len(counts) != 2 {
		t.Fatalf("30 guesses at once over two replicas: %v, want exactly 10×401 and 20×429", counts)
	}
	for _, gw := range []*apptest.Replica{f.gw, second} {
		r := do(t, signInRequest(t, gw.URL, f.member.Email, signInPassword))
		if r.status != http.StatusTooManyRequests || !strings.Contains(r.body, "Too many failed sign-ins") {
			t.Errorf("the right password while locked: %d, want 429 with the sign-in page's message", r.status)
		}
	}
}

// TestSignInThrottleWithoutRedisIsAtomic: a single replica without Redis
// counts each attempt before hashing, so guesses at once cannot pass the limit.
func TestSignInThrottleWithoutRedisIsAtomic(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withPassword(t)
	gw := f.replicaWith(t, map[string]string{"REDIS_URL": ""})

	counts := guessAtOnce(t, 30, f.member.Email, gw)
	if counts[http.StatusUnauthorized] != 10 || counts[http.StatusTooManyRequests] != 20 || len(counts) != 2 {
		t.Fatalf("30 guesses at once: %v, want exactly 10×401 and 20×429", counts)
	}
	// A successful sign-in gives its attempt back and clears the account.
	other := newFixture(t)
	other.withPassword(t)
	gw = other.replicaWith(t, map[string]string{"REDIS_URL": ""}, app.WithSignInLimit(console.SignInLimit{PerAccount: 2, PerAddress: 3}))
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := range 4 {
		resp, err := noRedirect.Do(signInRequest(t, gw.URL, other.member.Email, signInPassword))
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in %d with the right password, limit 3 per address: %d, want 303", i+1, resp.StatusCode)
		}
	}
}

// TestSignInAddressIsNotSpoofable: an address's bucket does not reset when the
// caller sends X-Forwarded-For or Fly-Client-IP, unless the deployment says a
// trusted proxy sets the header; then only the address the proxy appended counts.
func TestSignInAddressIsNotSpoofable(t *testing.T) {
	t.Parallel()
	limit := app.WithSignInLimit(console.SignInLimit{PerAccount: 100, PerAddress: 3})
	spray := func(t *testing.T, gw *apptest.Replica, header func(i int) []string) []int {
		var statuses []int
		for i := range 4 {
			email := "nobody-" + string(rune('a'+i)) + "@acme.test"
			statuses = append(statuses, do(t, signInRequest(t, gw.URL, email, "wrong-guess", header(i)...)).status)
		}
		return statuses
	}
	locked := func(statuses []int) bool {
		return statuses[0] == http.StatusUnauthorized && statuses[2] == http.StatusUnauthorized && statuses[3] == http.StatusTooManyRequests
	}

	t.Run("NoTrustedProxy", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		gw := f.replicaWith(t, nil, limit)
		got := spray(t, gw, func(i int) []string {
			ip := "198.51.100." + string(rune('1'+i))
			return []string{"X-Forwarded-For", ip, "Fly-Client-IP", ip, "X-Real-IP", ip}
		})
		if !locked(got) {
			t.Errorf("4 failures from one peer with a new forwarded address each: %v, want 401, 401, 401, 429", got)
		}
	})
	t.Run("TrustedProxyAppends", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		gw := f.replicaWith(t, map[string]string{"CLIENT_IP_HEADER": "X-Forwarded-For"}, limit)
		// The caller forges the first entries; the proxy appends the peer it saw.
		got := spray(t, gw, func(i int) []string {
			return []string{"X-Forwarded-For", "10.0.0." + string(rune('1'+i)) + ", 203.0.113.9"}
		})
		if !locked(got) {
			t.Errorf("4 failures through the proxy from one caller forging entries: %v, want 401, 401, 401, 429", got)
		}
		// Another caller behind the same proxy has a bucket of its own.
		if r := do(t, signInRequest(t, gw.URL, "someone@acme.test", "wrong-guess", "X-Forwarded-For", "203.0.113.10")); r.status != http.StatusUnauthorized {
			t.Errorf("another caller's first failure: %d, want 401", r.status)
		}
	})
}

// TestSignInDoesNotEnumerate: an unknown email and a wrong password get the
// same answer through a real gateway, and the throttle treats them alike.
func TestSignInDoesNotEnumerate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withPassword(t)
	wrong := do(t, signInRequest(t, f.gw.URL, f.member.Email, "wrong-guess"))
	unknown := do(t, signInRequest(t, f.gw.URL, "nobody@acme.test", "wrong-guess"))
	if wrong.status != http.StatusUnauthorized || unknown.status != http.StatusUnauthorized {
		t.Fatalf("wrong password %d, unknown email %d: want 401 for both", wrong.status, unknown.status)
	}
	if strings.ReplaceAll(wrong.body, f.member.Email, "X") != strings.ReplaceAll(unknown.body, "nobody@acme.test", "X") {
		t.Error("a wrong password and an unknown email answer differently")
	}
}

// TestConsoleAndAdminListenerCheckHost (HOSTILE 59): under a Host that is not
// the gateway's, the console, the admin API and the admin listener answer 421
// and nothing else (a DNS-rebinding page cannot read them); provider routes
// answer under any Host, and a loopback PUBLIC_URL admits every loopback name.
func TestConsoleAndAdminListenerCheckHost(t *testing.T) {
	t.Parallel()
	withHost := func(req *http.Request, host string) *http.Request {
		req.Host = host
		return req
	}
	get := func(t *testing.T, u, host string) response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, u, nil)
		must(t, err)
		return do(t, withHost(req, host))
	}
	wantMisdirected := func(t *testing.T, what string, r response) {
		t.Helper()
		if r.status != http.StatusMisdirectedRequest || strings.Contains(r.body, "<") || r.header.Get("Set-Cookie") != "" {
			t.Errorf("%s: %d %.80q, want a plain 421 and nothing else", what, r.status, r.body)
		}
	}

	f := newFixture(t)
	f.withPassword(t)
	// PUBLIC_URL is the default, http://127.0.0.1:8080: a loopback host.
	port := f.gw.URL[strings.LastIndexByte(f.gw.URL, ':'):]
	wantMisdirected(t, "console sign-in page", get(t, f.gw.URL+"/console/signin", "evil.example"+port))
	wantMisdirected(t, "console sign-in", do(t, withHost(signInRequest(t, f.gw.URL, f.member.Email, signInPassword), "evil.example")))
	wantMisdirected(t, "admin API", get(t, f.gw.URL+"/api/v1/members", "evil.example"))
	for _, host := range []string{"localhost" + port, "127.0.0.1" + port, "[::1]" + port} {
		if r := get(t, f.gw.URL+"/console/signin", host); r.status != http.StatusOK {
			t.Errorf("console under %s: %d, want 200", host, r.status)
		}
	}
	if r := do(t, withHost(anthropicRequest(t, f.gw.URL, f.key, messagesBody), "evil.example")); r.status != http.StatusOK {
		t.Errorf("provider route under another Host: %d, want 200", r.status)
	}

	public := f.replicaWith(t, map[string]string{"PUBLIC_URL": "https://gw.example.com"})
	if r := get(t, public.URL+"/console/signin", "GW.example.com"); r.status != http.StatusOK {
		t.Errorf("console under PUBLIC_URL's host: %d, want 200", r.status)
	}
	wantMisdirected(t, "console under a loopback name when PUBLIC_URL is public", get(t, public.URL+"/console/signin", "localhost"+port))

	admin := apptest.StartObserved(t, dbtest.Schema(t), map[string]string{"ADMIN_HOSTS": "metrics.internal"})
	adminPort := admin.AdminURL[strings.LastIndexByte(admin.AdminURL, ':'):]
	for _, path := range []string{"/metrics", "/readyz", "/debug/pprof/"} {
		wantMisdirected(t, "admin listener "+path, get(t, admin.AdminURL+path, "rebind.evil.example"+adminPort))
	}
	for _, host := range []string{"127.0.0.1" + adminPort, "localhost" + adminPort, "[fdaa::3]:9090", "metrics.internal:9090"} {
		if r := get(t, admin.AdminURL+"/metrics", host); r.status != http.StatusOK {
			t.Errorf("admin listener under %s: %d, want 200", host, r.status)
		}
	}
}
