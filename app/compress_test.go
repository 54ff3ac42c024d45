package app_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestOnlyTheConsoleIsCompressed: a browser asking for gzip gets the console's
// pages gzipped, but a provider route's answer goes back as the provider sent
// it, whatever the client accepts (SDKs read it as they would from the
// provider, and streams are not held back by a compressor).
func TestOnlyTheConsoleIsCompressed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, stream := range []bool{false, true} {
		body := messagesBody
		if stream {
			body = strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)
		}
		req := anthropicRequest(t, f.gw.URL, f.key, body)
		req.Header.Set("Accept-Encoding", "gzip")
		r := do(t, req)
		if r.status != http.StatusOK || r.header.Get("Content-Encoding") != "" || !strings.Contains(r.body, `"message`) {
			t.Errorf("provider route (stream %v) with Accept-Encoding gzip: %d, Content-Encoding %q\n%.300s", stream, r.status, r.header.Get("Content-Encoding"), r.body)
		}
	}
	req, err := http.NewRequest(http.MethodGet, f.gw.URL+"/console/signin", nil)
	must(t, err)
	req.Header.Set("Accept-Encoding", "gzip")
	if r := do(t, req); r.status != http.StatusOK || r.header.Get("Content-Encoding") != "gzip" {
		t.Errorf("console page with Accept-Encoding gzip: %d, Content-Encoding %q", r.status, r.header.Get("Content-Encoding"))
	}
}
