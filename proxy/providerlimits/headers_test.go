package providerlimits_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/proxy/providerlimits"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// received is when every golden response arrived (its Date header).
var received = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// readHeaders reads a response's status line and headers as they came on the wire.
func readHeaders(t *testing.T, path string) http.Header {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(append(b, '\n'))))
	if _, err := r.ReadLine(); err != nil {
		t.Fatal(err)
	}
	h, err := r.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return http.Header(h)
}

// TestParseGolden: real-shaped header sets of both providers, 200s and 429s,
// and a hostile set, parse to what the .golden beside each says.
func TestParseGolden(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/*.headers")
	if len(files) < 5 {
		t.Fatalf("found %d header files", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			got, _ := json.MarshalIndent(providerlimits.Parse(readHeaders(t, f), received), "", "  ")
			golden := strings.TrimSuffix(f, ".headers") + ".golden"
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(want) != string(got)+"\n" {
				t.Errorf("Parse(%s) =\n%s\nwant\n%s", f, got, want)
			}
		})
	}
}

// TestParseIgnoresHostileValues: each malformed, absurd or hostile value is
// left out, and never panics; the well-formed window beside it still counts.
func TestParseIgnoresHostileValues(t *testing.T) {
	t.Parallel()
	good := map[string]string{"X-Ratelimit-Limit-Tokens": "1000", "X-Ratelimit-Remaining-Tokens": "10", "X-Ratelimit-Reset-Tokens": "1s"}
	tests := []struct{ name, header, value string }{
		{"NegativeLimit", "X-Ratelimit-Limit-Requests", "-5"},
		{"ZeroLimit", "X-Ratelimit-Limit-Requests", "0"},
		{"HexLimit", "X-Ratelimit-Limit-Requests", "0x10"},
		{"HugeLimit", "X-Ratelimit-Limit-Requests", "99999999999999999999999"},
		{"Trillions", "X-Ratelimit-Limit-Requests", "1000000000001"},
		{"RemainingAboveLimit", "X-Ratelimit-Remaining-Requests", "101"},
		{"NegativeRemaining", "X-Ratelimit-Remaining-Requests", "-1"},
		{"FloatRemaining", "X-Ratelimit-Remaining-Requests", "1.5"},
		{"NegativeReset", "X-Ratelimit-Reset-Requests", "-1s"},
		{"ResetNotADuration", "X-Ratelimit-Reset-Requests", "soon"},
		{"ResetDays", "X-Ratelimit-Reset-Requests", "2d"},
		{"ResetOverflows", "X-Ratelimit-Reset-Requests", "2562047h47m16.854775808s"},
		{"ResetBeyondADay", "X-Ratelimit-Reset-Requests", "25h"},
		{"ResetLong", "X-Ratelimit-Reset-Requests", strings.Repeat("1", 100) + "ns"},
		{"LimitLong", "X-Ratelimit-Limit-Requests", strings.Repeat("0", 80) + "100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range good {
				h.Set(k, v)
			}
			h.Set("X-Ratelimit-Limit-Requests", "100")
			h.Set("X-Ratelimit-Remaining-Requests", "0")
			h.Set("X-Ratelimit-Reset-Requests", "1s")
			h.Set(tt.header, tt.value)
			o := providerlimits.Parse(h, received)
			if o.Requests.Known() {
				t.Errorf("%s: %q: requests window %+v, want it left out", tt.header, tt.value, o.Requests)
			}
			if o.Tokens.Remaining != 10 || !o.Tokens.Reset.Equal(received.Add(time.Second)) {
				t.Errorf("the good tokens window beside it = %+v", o.Tokens)
			}
		})
	}
	anthropic := []struct{ name, value string }{
		{"NotRFC3339", "Thu, 01 Jan 2026 00:00:15 GMT"},
		{"FarFuture", "9999-12-31T23:59:59Z"},
		{"Garbage", "\x00\xff"},
	}
	for _, tt := range anthropic {
		t.Run("AnthropicReset"+tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{"Anthropic-Ratelimit-Requests-Limit": {"50"}, "Anthropic-Ratelimit-Requests-Remaining": {"0"},
				"Anthropic-Ratelimit-Requests-Reset": {tt.value}}
			if o := providerlimits.Parse(h, received); o.Requests.Known() {
				t.Errorf("reset %q: requests window %+v, want it left out", tt.value, o.Requests)
			}
		})
	}
	retries := []struct {
		name, header, value string
		want                time.Duration
	}{
		{"Seconds", "Retry-After", "3", 3 * time.Second},
		{"HTTPDate", "Retry-After", "Thu, 01 Jan 2026 00:00:07 GMT", 7 * time.Second},
		{"Millis", "Retry-After-Ms", "250", 250 * time.Millisecond},
		{"ZeroSeconds", "Retry-After", "0", 0},
		{"NegativeSeconds", "Retry-After", "-3", 0},
		{"OverflowSeconds", "Retry-After", "99999999999999999999", 0},
		{"YearSeconds", "Retry-After", "31536000", 0},
		{"PastDate", "Retry-After", "Wed, 31 Dec 2025 23:00:00 GMT", 0},
		{"NaNMillis", "Retry-After-Ms", "NaN", 0},
		{"InfMillis", "Retry-After-Ms", "+Inf", 0},
		{"NegativeMillis", "Retry-After-Ms", "-100", 0},
		{"Words", "Retry-After", "later", 0},
	}
	for _, tt := range retries {
		t.Run("RetryAfter"+tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			h.Set(tt.header, tt.value)
			if got := providerlimits.Parse(h, received).RetryAfter; got != tt.want {
				t.Errorf("%s: %q = %s, want %s", tt.header, tt.value, got, tt.want)
			}
		})
	}
}
