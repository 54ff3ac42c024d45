package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/app/store"
)

// TestSecretsNeverLeak drives successes, provider errors, a dead upstream, a
// reflecting upstream, a hostile one (hostileUpstream: cookies, a huge header,
// the credential echoed in every form), a cut stream and bad keys, then searches
// every response (status line, headers, trailers, body) and every gateway log
// line, in any case, for the planted provider credentials and the member key's
// secret.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()

	// An upstream that reflects the credential it receives into a response header.
	reflecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Credential", r.Header.Get("x-api-key"))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(reflecting.Close)
	hostile := hostileUpstream(t).URL
	for _, spec := range []store.RouteSpec{
		{Prefix: "/reflect", UpstreamURL: reflecting.URL, Dialect: "generic", CredentialHeader: "x-api-key", CredentialEnv: "ANTHROPIC_API_KEY"},
		{Prefix: "/dead", UpstreamURL: "http://127.0.0.1:1", Dialect: "anthropic", CredentialHeader: "x-api-key", CredentialEnv: "ANTHROPIC_API_KEY"},
		{Prefix: "/hostile", UpstreamURL: hostile, Preset: "openai"},
		{Prefix: "/hostile-generic", UpstreamURL: hostile, Dialect: "generic", CredentialHeader: "Authorization", CredentialEnv: "OPENAI_API_KEY", CredentialFormat: "Bearer {}"},
	} {
		spec.TeamID = f.team.ID
		_, err := f.st.AddRoute(ctx, store.ActorCLI, spec)
		must(t, err)
	}
	// anthropicRequest appends /anthropic/v1/messages, which is just a path below these prefixes.
	eventually(t, 10*time.Second, "new routes loaded", func() bool {
		return do(t, anthropicRequest(t, f.gw.URL+"/reflect", f.key, messagesBody)).status == http.StatusOK &&
			do(t, anthropicRequest(t, f.gw.URL+"/dead", f.key, messagesBody)).status == http.StatusBadGateway &&
			do(t, hostileRequest(t, f, "/hostile", "", chatBody)).status == http.StatusOK &&
			do(t, hostileRequest(t, f, "/hostile-generic", "", chatBody)).status == http.StatusOK
	})

	var captured strings.Builder
	send := func(req *http.Request) {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			captured.WriteString(err.Error())
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body) // a cut stream ends in an error; what arrived still counts
		captured.WriteString(resp.Status + "\n")
		resp.Header.Write(&captured)
		resp.Trailer.Write(&captured)
		captured.Write(body)
	}
	streamBody := `{"model":"claude-sonnet-4-5","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	send(anthropicRequest(t, f.gw.URL, f.key, messagesBody))
	send(anthropicRequest(t, f.gw.URL, f.key, streamBody))
	for _, status := range []string{"400", "401", "429", "500", "529"} {
		req := anthropicRequest(t, f.gw.URL, f.key, messagesBody)
		req.Header.Set("X-Mock-Fail-Status", status)
		send(req)
	}
	cut := anthropicRequest(t, f.gw.URL, f.key, streamBody)
	cut.Header.Set("X-Mock-Disconnect-After-Events", "3")
	send(cut)
	req, err := http.NewRequest(http.MethodPost, f.gw.URL+"/openai/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+f.key)
	send(req)
	send(anthropicRequest(t, f.gw.URL+"/dead", f.key, messagesBody))
	send(anthropicRequest(t, f.gw.URL+"/reflect", f.key, messagesBody))
	for _, behaviour := range []string{"cookies", "big-header", "echo", "echo-gzip", "echo-br", "echo-stream", ""} {
		for _, prefix := range []string{"/hostile", "/hostile-generic"} {
			send(hostileRequest(t, f, prefix, behaviour, strings.Replace(chatBody, `"max_tokens":16`, `"max_tokens":16,"stream":true`, 1)))
		}
	}
	send(anthropicRequest(t, f.gw.URL, f.key+"x", messagesBody))
	send(anthropicRequest(t, f.gw.URL, strings.Replace(f.key, "tg_", "tg_x", 1), messagesBody))
	// The key in the query beside a valid header key, encoded paths, and
	// smuggling payloads on raw sockets (TestKeyInQueryNeverForwarded,
	// TestEncodedSeparatorsRefused, TestAmbiguousFramingIsRefused).
	for _, query := range keyInQueryVariants(f.key) {
		req := anthropicRequest(t, f.gw.URL, f.key, messagesBody)
		req.URL.RawQuery = query
		send(req)
	}
	for _, path := range []string{"/anthropic/..%2fopenai/v1/chat/completions", "/anthropic/%2e%2e%2fv1", "/anthropic/..%5cv1"} {
		req := anthropicRequest(t, f.gw.URL, f.key, messagesBody)
		req.URL.Opaque = path
		send(req)
	}
	head := "POST /anthropic/v1/messages HTTP/1.1\r\nHost: gw\r\nx-api-key: " + f.key + "\r\nanthropic-version: 2023-06-01\r\n"
	for _, framing := range []string{"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "Transfer-Encoding:\r\n chunked\r\nContent-Length: 5\r\n"} {
		got, _ := rawExchange(t, f.gw.URL, head+framing+"\r\n0\r\n\r\n"+head+"Content-Length: 2\r\n\r\n{}")
		for _, r := range got {
			captured.WriteString(strconv.Itoa(r.status) + "\n")
			r.header.Write(&captured)
			captured.WriteString(r.body)
		}
	}

	out := captured.String()
	logs := f.gw.Logs.String()
	var upstream strings.Builder // what the mock provider received
	for _, rec := range f.mock.Records() {
		upstream.WriteString(rec.Path + " " + rec.RawPath + "?" + rec.RawQuery + "\n")
	}
	if !strings.Contains(out, "tok tok") || !strings.Contains(out, "could not be reached") ||
		!strings.Contains(out, "Incorrect API key provided") || !strings.Contains(out, "your key is") {
		t.Fatalf("the scripted run did not exercise success and failure paths:\n%s", out)
	}
	if !strings.Contains(logs, `"refusal":`) || !strings.Contains(logs, "upstream request failed") {
		t.Fatalf("the logs did not capture refusals and upstream failures:\n%s", logs)
	}
	_, memberSecret, _ := strings.Cut(strings.TrimPrefix(f.key, "tg_"), "_")
	for name, secret := range map[string]string{
		"anthropic credential": anthropicSecret,
		"openai credential":    openaiSecret,
		"member key secret":    memberSecret,
	} {
		if containsFold(out, secret) {
			t.Errorf("%s appears in a response", name)
		}
		if containsFold(logs, secret) {
			t.Errorf("%s appears in the gateway log", name)
		}
		if name == "member key secret" && strings.Contains(strings.ToLower(upstream.String()), secret) {
			t.Errorf("%s reached the upstream", name)
		}
	}
	if strings.Contains(out, "X-Seen-Credential") {
		t.Errorf("a response header carrying the credential was passed through")
	}
	if strings.Contains(out, "Set-Cookie") {
		t.Errorf("an upstream cookie was passed through")
	}
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// TestAdminTokensNeverLeak drives the admin API with owner, read, revoked,
// mangled and misplaced admin tokens, on successes, refusals and errors, then
// searches every response, log line, span and audit row for the tokens'
// secrets. Plaintext member keys the API issues appear in their one response
// and nowhere else.
func TestAdminTokensNeverLeak(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.Schema(t)
	gw := apptest.StartObserved(t, dbURL, nil)
	st := gw.App.Store
	team, err := st.CreateTeam(ctx, store.ActorCLI, "acme")
	must(t, err)
	token := func(role string) store.IssuedAdminToken {
		tok, err := st.CreateAdminToken(ctx, store.ActorCLI, store.AdminTokenSpec{TeamID: &team.ID, Name: "ci-" + role, Role: role, Lifetime: time.Hour})
		must(t, err)
		return tok
	}
	owner, read, revoked := token(store.TokenRoleOwner), token(store.TokenRoleRead), token(store.TokenRoleOwner)
	_, err = st.RevokeAdminToken(ctx, store.ActorCLI, &team.ID, revoked.ID)
	must(t, err)
	deployment, err := st.CreateAdminToken(ctx, store.ActorCLI, store.AdminTokenSpec{Name: "prices", Role: store.TokenRoleOwner, Lifetime: time.Hour})
	must(t, err)

	var captured strings.Builder
	send := func(method, path, authorization, body string, headers ...string) string {
		req, err := http.NewRequest(method, gw.URL+path, strings.NewReader(body))
		must(t, err)
		req.Header.Set("Content-Type", "application/json")
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			captured.WriteString(err.Error())
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		captured.WriteString(resp.Status + "\n")
		resp.Header.Write(&captured)
		captured.Write(b)
		return string(b)
	}
	bearer := func(tok store.IssuedAdminToken) string { return "Bearer " + tok.Plaintext }
	created := send(http.MethodPost, "/api/v1/members", bearer(owner), `{"email":"ada@acme.test"}`, "Idempotency-Key", "k1")
	send(http.MethodPost, "/api/v1/members", bearer(owner), `{"email":"ada@acme.test"}`, "Idempotency-Key", "k1")
	var m store.Member
	must(t, json.Unmarshal([]byte(created), &m))
	keysPath := "/api/v1/members/" + strconv.FormatInt(m.ID, 10) + "/keys"
	var issued store.IssuedKey
	must(t, json.Unmarshal([]byte(send(http.MethodPost, keysPath, bearer(owner), `{"name":"ci"}`, "Idempotency-Key", "k2")), &issued))
	issuedResponse := captured.Len()
	send(http.MethodPost, keysPath, bearer(owner), `{"name":"ci"}`, "Idempotency-Key", "k2") // a replay: no plaintext again
	send(http.MethodGet, "/api/v1/keys", bearer(read), "")
	send(http.MethodGet, "/api/v1/audit", bearer(read), "")
	send(http.MethodPost, "/api/v1/members", bearer(read), `{"email":"bob@acme.test"}`)                                                              // 403
	send(http.MethodPost, "/api/v1/members", bearer(owner), `{"email":"`+owner.Plaintext+`"}`)                                                       // 422 quoting the input
	send(http.MethodGet, "/api/v1/members", bearer(revoked), "")                                                                                     // 401
	send(http.MethodGet, "/api/v1/members", "Bearer "+owner.Plaintext+"x", "")                                                                       // 401 malformed
	send(http.MethodGet, "/api/v1/members", "Basic "+owner.Plaintext, "")                                                                            // 401
	send(http.MethodGet, "/api/v1/members?token="+url.QueryEscape(owner.Plaintext), "", "")                                                          // 401
	send(http.MethodPut, "/api/v1/prices/test-model", bearer(owner), `{"input_micros_per_mtok":1,"output_micros_per_mtok":1,"max_output_tokens":1}`) // 403
	send(http.MethodPut, "/api/v1/prices/test-model", bearer(deployment), `{"input_micros_per_mtok":1,"output_micros_per_mtok":1,"max_output_tokens":1}`)
	send(http.MethodGet, "/anthropic/v1/models", bearer(owner), "") // an admin token at the gateway is no member key

	out := captured.String()
	if !strings.Contains(out, "403 Forbidden") || !strings.Contains(out, "401 Unauthorized") || !strings.Contains(out, "201 Created") {
		t.Fatalf("the scripted run did not exercise successes and refusals:\n%s", out)
	}
	audit, err := st.Audit(ctx, nil, 10000)
	must(t, err)
	var auditText strings.Builder
	for _, e := range audit {
		fmt.Fprintln(&auditText, e.Actor, e.Action, e.Target, string(e.Before), string(e.After))
	}
	spans := spanText(gw.Spans.Ended())
	logs := gw.Logs.String()
	secret := func(plaintext string) string { return plaintext[len(plaintext)-52:] }
	for name, s := range map[string]string{
		"owner token": secret(owner.Plaintext), "read token": secret(read.Plaintext),
		"revoked token": secret(revoked.Plaintext), "deployment token": secret(deployment.Plaintext),
	} {
		for where, text := range map[string]string{"a response": out, "the log": logs, "a span": spans, "the audit log": auditText.String()} {
			if containsFold(text, s) {
				t.Errorf("the %s's secret appears in %s", name, where)
			}
		}
	}
	keySecret := secret(issued.Plaintext)
	if strings.Count(out, keySecret) != 1 || !strings.Contains(out[:issuedResponse], keySecret) {
		t.Errorf("the issued key's secret appears %d times in responses, want once, in its own", strings.Count(out, keySecret))
	}
	for where, text := range map[string]string{"the log": logs, "a span": spans, "the audit log": auditText.String()} {
		if strings.Contains(text, keySecret) {
			t.Errorf("the issued key's secret appears in %s", where)
		}
	}
}

// TestSSOClientSecretsNeverLeak signs in through a team's OpenID provider,
// then saves and uses another team's method whose secret is wrong (the test
// provider, like some real ones, echoes the secret it was sent in its error),
// and searches every response and log line for both client secrets.
func TestSSOClientSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	provider, err := mockoidc.Run()
	must(t, err)
	t.Cleanup(func() { provider.Shutdown() })
	const (
		wrongSecret = "oidc-secret-PLANTED-wrong-b7e2"
		password    = "correct horse battery"
	)
	token, _, err := f.st.CreateSetupLink(ctx, store.ActorCLI)
	must(t, err)
	_, err = f.st.CompleteSetup(ctx, token, "beta", "owner@beta.test", password)
	must(t, err)
	beta, err := f.st.FindTeam(ctx, "beta")
	must(t, err)
	for _, team := range []store.Team{f.team, beta} {
		_, err := f.st.SetSSOMethod(ctx, store.ActorCLI, store.SSOMethod{TeamID: team.ID, Kind: store.SignInOIDC,
			DisplayName: "ID", IssuerURL: provider.Issuer(), ClientID: provider.ClientID, JoinPolicy: store.JoinInvited, Enabled: true})
		must(t, err)
	}
	gw := f.replicaWith(t, map[string]string{
		store.SSOSecretEnv("acme", store.SignInOIDC): provider.ClientSecret,
		store.SSOSecretEnv("beta", store.SignInOIDC): wrongSecret,
	})

	var captured strings.Builder
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	send := func(c *http.Client, req *http.Request) *http.Response {
		resp, err := c.Do(req)
		must(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		captured.WriteString(resp.Status + "\n")
		resp.Header.Write(&captured)
		captured.Write(body)
		return resp
	}
	get := func(c *http.Client, url string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		must(t, err)
		return send(c, req)
	}
	// signIn follows the flow; the callback goes to this replica, whatever its PUBLIC_URL says.
	signIn := func(team string) int {
		c := browser()
		start := get(c, gw.URL+"/console/signin/"+team+"/oidc")
		if start.StatusCode != http.StatusSeeOther {
			return start.StatusCode
		}
		back := get(c, start.Header.Get("Location"))
		callback, err := url.Parse(back.Header.Get("Location"))
		must(t, err)
		return get(c, gw.URL+callback.RequestURI()).StatusCode
	}
	provider.QueueUser(&mockoidc.MockUser{Subject: "ada", Email: "ada@acme.test", EmailVerified: true})
	if status := signIn("acme"); status != http.StatusSeeOther {
		t.Fatalf("acme's member signs in by OIDC: %d", status)
	}
	provider.QueueUser(&mockoidc.MockUser{Subject: "ada", Email: "ada@acme.test", EmailVerified: false})
	signIn("acme")
	if status := signIn("beta"); status != http.StatusBadGateway {
		t.Fatalf("beta's sign-in with a wrong secret: %d, want 502", status)
	}
	owner := browser()
	form := url.Values{"email": {"owner@beta.test"}, "password": {password}}
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/console/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	send(owner, req)
	form = url.Values{"display_name": {"ID"}, "issuer_url": {provider.Issuer()}, "client_id": {provider.ClientID},
		"join_policy": {"invited"}, "enabled": {"on"}}
	req, _ = http.NewRequest(http.MethodPost, gw.URL+"/console/team/sign-in/sso/oidc", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	send(owner, req)

	out, logs := captured.String(), gw.Logs.String()
	if !strings.Contains(out, "the provider refused the client id or secret") || !strings.Contains(out, "has not verified the email address") {
		t.Fatalf("the run did not exercise a refused secret and a refused sign-in:\n%s", out)
	}
	for name, secret := range map[string]string{"acme's client secret": provider.ClientSecret, "beta's wrong client secret": wrongSecret} {
		if containsFold(out, secret) {
			t.Errorf("%s appears in a response", name)
		}
		if containsFold(logs, secret) {
			t.Errorf("%s appears in the gateway log", name)
		}
	}
}
