package app_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
	"github.com/tollgate/tollgate/proxy"
)

// hostileUpstream is an OpenAI-shaped upstream that misbehaves as the request's
// X-Hostile header asks: it sets cookies (the console's own names among them),
// sends a 1 MB header, echoes the credential it was sent in every form it can
// (raw, without "Bearer ", lower- and upper-cased, inside another value, in a
// header name, in a JSON error body, split across stream chunks), or streams a
// chat answer with the usage chunk when asked for it.
func hostileUpstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		bearer := r.Header.Get("Authorization")
		key := strings.TrimPrefix(bearer, "Bearer ")
		h := w.Header()
		switch r.Header.Get("X-Hostile") {
		case "cookies":
			h.Add("Set-Cookie", "tollgate=upstream-session; Path=/; HttpOnly")
			h.Add("Set-Cookie", "__Host-tollgate=upstream-session; Path=/; Secure; HttpOnly")
			h.Add("Set-Cookie", "tracking=1; Domain=example.com")
			h.Add("Set-Cookie2", "legacy=1; Version=1")
			h.Set("Trailer", "Set-Cookie")
			h.Set("Content-Type", "application/json")
			io.WriteString(w, chatAnswer)
			h.Set("Set-Cookie", "tollgate=from-a-trailer; Path=/")
		case "early-hints":
			// Informational answers carry headers ReverseProxy would copy to the
			// caller before the real answer, past every scrub.
			h.Set("Set-Cookie", "tollgate=from-early-hints; Path=/")
			h.Set("X-Echo-Raw", key)
			w.WriteHeader(http.StatusEarlyHints)
			h.Del("Set-Cookie")
			h.Del("X-Echo-Raw")
			h.Set("Content-Type", "application/json")
			io.WriteString(w, chatAnswer)
		case "big-header":
			h.Set("X-Big", strings.Repeat("b", 1<<20))
			h.Set("Content-Type", "application/json")
			io.WriteString(w, chatAnswer)
		case "echo":
			h.Set("X-Echo-Bearer", bearer)
			h.Set("X-Echo-Raw", key)
			h.Set("X-Echo-Lower", strings.ToLower(key))
			h.Set("X-Echo-Upper", strings.ToUpper(key))
			h.Set("X-Echo-Inside", "seen="+key+"; ok")
			h.Set("X-"+key, "in the name")
			h.Set("Trailer", "X-Echo-Trailer")
			h.Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			msg, _ := json.Marshal("Incorrect API key provided: " + key + " (" + strings.ToLower(key) + ", " + bearer + ")")
			io.WriteString(w, `{"error":{"message":`+string(msg)+`,"type":"invalid_request_error","code":"invalid_api_key"}}`)
			h.Set("X-Echo-Trailer", key)
		case "echo-gzip", "echo-br":
			h.Set("Content-Type", "application/json")
			if r.Header.Get("X-Hostile") == "echo-br" {
				h.Set("Content-Encoding", "br") // whatever the gateway asked for
				io.WriteString(w, key)
				return
			}
			msg := `{"error":{"message":"Incorrect API key provided: ` + key + `"}}`
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				io.WriteString(w, msg)
				return
			}
			h.Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, msg)
			zw.Close()
		case "echo-stream":
			h.Set("Content-Type", "text/event-stream")
			flusher := w.(http.Flusher)
			half := len(key) / 2
			// The key split across two writes, each flushed: two chunks on the wire.
			io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"your key is `+key[:half])
			flusher.Flush()
			time.Sleep(20 * time.Millisecond)
			io.WriteString(w, key[half:]+`, or `+strings.ToUpper(key)+`"}}]}`+"\n\n")
			io.WriteString(w, "data: [DONE]\n\n")
		default: // an honest chat stream, with the usage chunk only when asked for
			h.Set("Content-Type", "text/event-stream")
			io.WriteString(w, chatStream)
			var req struct {
				StreamOptions struct {
					IncludeUsage bool `json:"include_usage"`
				} `json:"stream_options"`
			}
			json.Unmarshal(body, &req)
			if req.StreamOptions.IncludeUsage {
				io.WriteString(w, usageChunk)
			}
			io.WriteString(w, "data: [DONE]\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

const (
	chatAnswer = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	chatStream = `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"}}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	usageChunk = `data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` + "\n\n"
)

// addHostileRoute points a route at prefix to upstream: an OpenAI-preset one,
// or a generic one injecting the same credential the same way.
func addHostileRoute(t *testing.T, f *fixture, prefix, upstream string, generic bool) {
	t.Helper()
	spec := store.RouteSpec{TeamID: f.team.ID, Preset: "openai", Prefix: prefix, UpstreamURL: upstream}
	if generic {
		spec = store.RouteSpec{TeamID: f.team.ID, Prefix: prefix, UpstreamURL: upstream, Dialect: "generic",
			CredentialHeader: "Authorization", CredentialEnv: "OPENAI_API_KEY", CredentialFormat: "Bearer {}"}
	}
	_, err := f.st.AddRoute(context.Background(), store.ActorCLI, spec)
	must(t, err)
	eventually(t, 10*time.Second, "route "+prefix+" loaded", func() bool {
		return do(t, hostileRequest(t, f, prefix, "", chatBody)).status == http.StatusOK
	})
}

const chatBody = `{"model":"gpt-4o","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`

func hostileRequest(t *testing.T, f *fixture, prefix, behaviour, body string) *http.Request {
	req := chatRequest(t, f.gw.URL+prefix, f.key, body)
	req.Header.Set("X-Hostile", behaviour)
	return req
}

// TestHostileUpstreamResponses: through a real gateway, no upstream cookie, no
// oversized header and no echo of the provider credential, in any form, in
// headers, trailers, a JSON error body or a stream, reaches the caller.
func TestHostileUpstreamResponses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hostile := hostileUpstream(t).URL
	addHostileRoute(t, f, "/hostile", hostile, false)
	addHostileRoute(t, f, "/hostile-generic", hostile, true)
	streamBody := strings.Replace(chatBody, `"max_tokens":16`, `"max_tokens":16,"stream":true`, 1)

	t.Run("cookies", func(t *testing.T) {
		resp, err := http.DefaultClient.Do(hostileRequest(t, f, "/hostile", "cookies", chatBody))
		must(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"content":"hi"`) {
			t.Fatalf("the answer itself should pass: %d %s", resp.StatusCode, body)
		}
		for _, h := range []http.Header{resp.Header, resp.Trailer} {
			if got := h.Values("Set-Cookie"); len(got) > 0 {
				t.Errorf("Set-Cookie reached the caller: %q", got)
			}
			if got := h.Values("Set-Cookie2"); len(got) > 0 {
				t.Errorf("Set-Cookie2 reached the caller: %q", got)
			}
		}
		if len(resp.Cookies()) > 0 {
			t.Errorf("cookies reached the caller: %v", resp.Cookies())
		}
	})

	t.Run("1xx headers", func(t *testing.T) {
		var informational []http.Header
		req := hostileRequest(t, f, "/hostile", "early-hints", chatBody)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
				informational = append(informational, http.Header(h))
				return nil
			}}))
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the answer itself should pass: %d", resp.StatusCode)
		}
		if len(informational) > 0 {
			t.Errorf("an upstream 1xx reached the caller with its headers: %v", informational)
		}
	})

	t.Run("1 MB response header", func(t *testing.T) {
		r := do(t, hostileRequest(t, f, "/hostile", "big-header", chatBody))
		var e struct {
			Error struct {
				Message, Type string
			}
		}
		if r.status != http.StatusBadGateway || json.Unmarshal([]byte(r.body), &e) != nil ||
			!strings.Contains(e.Error.Message, "MAX_RESPONSE_HEADER_BYTES") || r.header.Get("X-Big") != "" {
			t.Fatalf("want an OpenAI-shaped 502 naming MAX_RESPONSE_HEADER_BYTES, got %d (X-Big of %d bytes) %s", r.status, len(r.header.Get("X-Big")), r.body)
		}
		row := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
		if row.Status == proxy.LedgerHeld {
			t.Fatalf("the request was not settled: %+v", row)
		}
	})

	t.Run("credential echoed", func(t *testing.T) {
		resp, err := http.DefaultClient.Do(hostileRequest(t, f, "/hostile", "echo", chatBody))
		must(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct{ Message, Code string }
		}
		if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(body, &e) != nil || e.Error.Code != "invalid_api_key" ||
			!strings.HasPrefix(e.Error.Message, "Incorrect API key provided: ") {
			t.Fatalf("the upstream's error should pass as valid JSON, key masked: %d %s", resp.StatusCode, body)
		}
		if resp.ContentLength >= 0 && resp.ContentLength != int64(len(body)) {
			t.Errorf("Content-Length %d for a %d-byte body", resp.ContentLength, len(body))
		}
		var seen strings.Builder
		resp.Header.Write(&seen)
		resp.Trailer.Write(&seen)
		seen.Write(body)
		if got := strings.ToLower(seen.String()); strings.Contains(got, strings.ToLower(openaiSecret)) {
			t.Fatalf("the credential reached the caller:\n%s", seen.String())
		}
		if resp.Header.Get("X-Echo-Inside") != "" {
			t.Errorf("a header carrying the credential inside its value was passed")
		}
	})

	t.Run("credential echoed in a compressed body", func(t *testing.T) {
		// The caller's client asks for gzip; on the generic route the upstream
		// sends it, on the paid one the gateway asks for identity.
		for _, prefix := range []string{"/hostile", "/hostile-generic"} {
			r := do(t, hostileRequest(t, f, prefix, "echo-gzip", chatBody))
			if r.status != http.StatusOK || !strings.Contains(r.body, "Incorrect API key provided: *****") {
				t.Fatalf("%s: the body should arrive readable and masked: %d %s", prefix, r.status, r.body)
			}
			r = do(t, hostileRequest(t, f, prefix, "echo-br", chatBody))
			if r.status != http.StatusBadGateway || !strings.Contains(r.body, "encoding the gateway did not ask for (br)") {
				t.Fatalf("%s: an encoding the gateway cannot read should be refused: %d %s", prefix, r.status, r.body)
			}
		}
	})

	t.Run("credential echoed in a stream", func(t *testing.T) {
		r := do(t, hostileRequest(t, f, "/hostile", "echo-stream", streamBody))
		if r.status != http.StatusOK || !strings.Contains(r.body, "your key is ") || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
			t.Fatalf("the stream should pass whole: %d %s", r.status, r.body)
		}
		if strings.Contains(strings.ToLower(r.body), strings.ToLower(openaiSecret)) {
			t.Fatalf("the credential reached the caller in a stream:\n%s", r.body)
		}
	})
}

// TestOpenAIStreamWithoutUsageAddsNothing: a caller who did not ask for usage
// gets exactly the stream it asked for, while the gateway still settles from
// the usage chunk it asked for; a caller who asked still gets the chunk.
func TestOpenAIStreamWithoutUsageAddsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	addHostileRoute(t, f, "/hostile", hostileUpstream(t).URL, false)
	for _, c := range []struct {
		name, body, want string
	}{
		{"caller did not ask", `{"model":"gpt-4o","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			chatStream + "data: [DONE]\n\n"},
		{"caller said false", `{"model":"gpt-4o","max_tokens":16,"stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`,
			chatStream + "data: [DONE]\n\n"},
		{"caller asked", `{"model":"gpt-4o","max_tokens":16,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			chatStream + usageChunk + "data: [DONE]\n\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, hostileRequest(t, f, "/hostile", "", c.body))
			if r.status != http.StatusOK || r.body != c.want {
				t.Fatalf("got %d:\n%q\nwant:\n%q", r.status, r.body, c.want)
			}
			row := ledgerRow(t, f, r.header.Get(proxy.RequestIDHeader))
			if row.Status != proxy.LedgerSettled || row.Usage.OutputTokens != 2 || row.Usage.InputTokens != 3 {
				t.Fatalf("the gateway should settle from the usage chunk: %+v", row)
			}
		})
	}
}
