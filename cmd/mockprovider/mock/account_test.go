package mock_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
	"github.com/tollgate/tollgate/proxy/providerlimits"
)

// TestAccountLimit: with an account limit every answer carries the provider's
// own rate-limit headers, in each provider's shape, and the request past the
// limit gets 429 with Retry-After, logged like any other.
func TestAccountLimit(t *testing.T) {
	t.Parallel()
	for _, p := range []struct {
		name, path, body string
		header           []string
	}{
		{"Anthropic", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"X-Api-Key", "k", "Anthropic-Version", "2023-06-01"}},
		{"OpenAI", "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"Authorization", "Bearer k"}},
	} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			m, url := start(t, mock.Options{RequestsPerMinute: 2, TokensPerMinute: 1000})
			for i, want := range []int{1, 0} {
				resp, _ := do(t, "POST", url+p.path, p.body, p.header...)
				o := providerlimits.Parse(resp.Header, time.Now())
				if resp.StatusCode != http.StatusOK || o.Requests.Limit != 2 || o.Requests.Remaining != int64(want) || o.Tokens.Limit != 1000 {
					t.Fatalf("request %d: %d, parsed %+v from %v", i+1, resp.StatusCode, o, resp.Header)
				}
			}
			resp, _ := do(t, "POST", url+p.path, p.body, p.header...)
			o := providerlimits.Parse(resp.Header, time.Now())
			if secs, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != http.StatusTooManyRequests || secs < 1 || secs > 30 ||
				o.Requests.Remaining != 0 || o.RetryAfter <= 0 {
				t.Errorf("third request: %d, Retry-After %q, parsed %+v", resp.StatusCode, resp.Header.Get("Retry-After"), o)
			}
			if recs := m.Records(); len(recs) != 3 || recs[2].Status != http.StatusTooManyRequests {
				t.Errorf("records = %+v", recs)
			}
		})
	}
}
