package estimate_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/proxy/estimate"
)

func TestParseReadsEachEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind estimate.Kind
		body string
		want estimate.Request
	}{
		{estimate.AnthropicMessages, `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			estimate.Request{Model: "claude-sonnet-4-5", Stream: true, MaxOutputTokens: 1024, MaxOutputField: "max_tokens", Choices: 1}},
		{estimate.AnthropicMessages, `{"model":"claude-sonnet-4-5","messages":[]}`,
			estimate.Request{Model: "claude-sonnet-4-5", MaxOutputField: "max_tokens", Choices: 1}},
		{estimate.OpenAIChat, `{"model":"gpt-4o","max_completion_tokens":50,"stream":true,"stream_options":{"include_usage":true},"n":2}`,
			estimate.Request{Model: "gpt-4o", Stream: true, IncludeUsage: true, MaxOutputTokens: 50, MaxOutputField: "max_completion_tokens", Choices: 2}},
		{estimate.OpenAIChat, `{"model":"gpt-4o","max_tokens":70,"stream":false,"stream_options":null,"n":null}`,
			estimate.Request{Model: "gpt-4o", MaxOutputTokens: 70, MaxOutputField: "max_tokens", Choices: 1}},
		{estimate.OpenAIChat, `{"model":"gpt-4o","max_tokens":70,"max_completion_tokens":90}`, // both: the larger
			estimate.Request{Model: "gpt-4o", MaxOutputTokens: 90, MaxOutputField: "max_completion_tokens", Choices: 1}},
		{estimate.OpenAIChat, `{"model":"gpt-4o","max_tokens":null,"stream":true,"stream_options":{}}`,
			estimate.Request{Model: "gpt-4o", Stream: true, MaxOutputField: "max_completion_tokens", Choices: 1}},
		{estimate.OpenAIResponses, `{"model":"gpt-4o","max_output_tokens":300,"stream":true,"input":"hi"}`,
			estimate.Request{Model: "gpt-4o", Stream: true, MaxOutputTokens: 300, MaxOutputField: "max_output_tokens", Choices: 1}},
		{estimate.OpenAIEmbeddings, `{"model":"text-embedding-3-small","input":["a","b"],"max_tokens":"ignored"}`,
			estimate.Request{Model: "text-embedding-3-small", Choices: 1}},
		{estimate.OpenAICompletions, `{"model":"gpt-3.5-turbo-instruct","prompt":"x","max_tokens":16,"n":2,"best_of":5}`,
			estimate.Request{Model: "gpt-3.5-turbo-instruct", MaxOutputTokens: 16, MaxOutputField: "max_tokens", Choices: 5}},
		{estimate.AnthropicMessages, "\t\r\n {\"model\" : \"mod\\u0065l-\\u00e9\\ud83d\\ude00\" , \"max_tokens\" : 1 } \n",
			estimate.Request{Model: "model-é😀", MaxOutputTokens: 1, MaxOutputField: "max_tokens", Choices: 1}},
	}
	for _, tt := range tests {
		got, err := estimate.Parse(tt.kind, []byte(tt.body))
		tt.want.Kind, tt.want.InputTokens = tt.kind, estimate.EstimateInputTokens([]byte(tt.body))
		if err != nil || got != tt.want {
			t.Errorf("Parse(%v, %s)\n got %+v, %v\nwant %+v", tt.kind, tt.body, got, err, tt.want)
		}
	}
}

// HOSTILE 10: max_tokens missing, negative, a float, a string, 2^63, above 2^31.
func TestParseOutputCeiling(t *testing.T) {
	t.Parallel()
	const msg = "max_tokens must be a positive integer no larger than 2147483648, got "
	tests := []struct {
		value string // "" leaves the field out
		want  int64
		err   string
	}{
		{"", 0, ""},
		{"null", 0, ""},
		{"1", 1, ""},
		{"4096", 4096, ""},
		{"2147483648", 1 << 31, ""},
		{"2147483649", 0, msg + "2147483649"},
		{"0", 0, msg + "0"},
		{"-1", 0, msg + "-1"},
		{"-0", 0, msg + "-0"},
		{"1.5", 0, msg + "1.5"},
		{"1.0", 0, msg + "1.0"},
		{"1e3", 0, msg + "1e3"},
		{`"abc"`, 0, msg + `"abc"`},
		{`"100"`, 0, msg + `"100"`},
		{"true", 0, msg + "true"},
		{"[100]", 0, msg + "[100]"},
		{`{"value":100}`, 0, msg + `{"value":100}`},
		{"9223372036854775808", 0, msg + "9223372036854775808"},   // 2^63
		{"18446744073709551617", 0, msg + "18446744073709551617"}, // past uint64
		{strings.Repeat("9", 400), 0, msg + strings.Repeat("9", 40) + "…"},                       // no overflow, message cut
		{"1" + strings.Repeat("0", 400) + "e-400", 0, msg + "1" + strings.Repeat("0", 39) + "…"}, // 1, as a float
	}
	for _, tt := range tests {
		body := `{"model":"claude-sonnet-4-5","messages":[]}`
		if tt.value != "" {
			body = `{"model":"claude-sonnet-4-5","max_tokens":` + tt.value + `,"messages":[]}`
		}
		r, err := estimate.Parse(estimate.AnthropicMessages, []byte(body))
		if tt.err == "" {
			if err != nil || r.MaxOutputTokens != tt.want {
				t.Errorf("max_tokens %s: got %d, %v; want %d", tt.value, r.MaxOutputTokens, err, tt.want)
			}
			continue
		}
		var be *estimate.BodyError
		if !errors.As(err, &be) || be.Field != "max_tokens" || be.Message != tt.err || estimate.HTTPStatus(err) != 400 {
			t.Errorf("max_tokens %s: err = %v, want 400 %q", tt.value, err, tt.err)
		}
	}
	// Each endpoint names its own field.
	for kind, body := range map[estimate.Kind]string{
		estimate.OpenAIChat:        `{"model":"m","max_completion_tokens":-5}`,
		estimate.OpenAIResponses:   `{"model":"m","max_output_tokens":2.5}`,
		estimate.OpenAICompletions: `{"model":"m","max_tokens":"16"}`,
	} {
		_, err := estimate.Parse(kind, []byte(body))
		var be *estimate.BodyError
		if !errors.As(err, &be) || !strings.HasPrefix(be.Message, be.Field+" must be a positive integer") {
			t.Errorf("%v %s: err = %v, want one naming its field", kind, body, err)
		}
	}
	for _, body := range []string{`{"model":"m","n":0}`, `{"model":"m","n":129}`, `{"model":"m","n":1.5}`} {
		if _, err := estimate.Parse(estimate.OpenAIChat, []byte(body)); estimate.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), "n must be") {
			t.Errorf("%s: err = %v, want n refused", body, err)
		}
	}
}

// HOSTILE 23 and 5: whatever the gateway reads, the upstream must read the same.
func TestParseRefusesAmbiguousBodies(t *testing.T) {
	t.Parallel()
	deep := func(n int) string {
		return `{"model":"m","x":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`
	}
	deepObj := func(n int) string {
		return `{"model":"m","x":` + strings.Repeat(`{"a":`, n-1) + "1" + strings.Repeat("}", n-1) + `}`
	}
	tests := []struct {
		name, body, want string
	}{
		{"duplicate model", `{"model":"cheap","max_tokens":1,"model":"expensive"}`, `the key "model" twice`},
		{"duplicate max_tokens", `{"model":"m","max_tokens":1,"max_tokens":100000}`, `the key "max_tokens" twice`},
		{"duplicate after unescaping", `{"model":"cheap","mod\u0065l":"expensive"}`, `the key "model" twice`},
		{"duplicate deep inside", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}]}`, `the key "text" twice`},
		{"duplicate in stream_options", `{"model":"m","stream_options":{"include_usage":false,"include_usage":true}}`, `the key "include_usage" twice`},
		{"duplicate in a large object", `{"model":"m","x":{` + manyKeys(1000) + `,"k500":1}}`, `the key "k500" twice`},
		{"NaN", `{"model":"m","temperature":NaN}`, "NaN and Infinity are not JSON"},
		{"Infinity", `{"model":"m","temperature":Infinity}`, "NaN and Infinity are not JSON"},
		{"-Infinity", `{"model":"m","temperature":-Infinity}`, "NaN and Infinity are not JSON"},
		{"invalid UTF-8", "{\"model\":\"m\",\"x\":\"\xff\"}", "not valid UTF-8"},
		{"overlong UTF-8", "{\"model\":\"m\",\"x\":\"\xc0\xaf\"}", "not valid UTF-8"},
		{"UTF-8 surrogate", "{\"model\":\"m\",\"x\":\"\xed\xa0\x80\"}", "not valid UTF-8"},
		{"lone high surrogate escape", `{"model":"m","x":"\ud800"}`, "unpaired surrogate"},
		{"lone low surrogate escape", `{"model":"m","x":"\udc00x"}`, "unpaired surrogate"},
		{"reversed surrogates", `{"model":"m","x":"\udc00\ud800"}`, "unpaired surrogate"},
		{"65 levels of arrays", deep(65), "nesting deeper than 64 levels"},
		{"65 levels of objects", deepObj(65), "nesting deeper than 64 levels"},
		{"10k levels", deep(10_000), "nesting deeper than 64 levels"},
		{"top-level array", `[{"model":"m"}]`, "must be a JSON object"},
		{"top-level string", `"model"`, "must be a JSON object"},
		{"top-level null", `null`, "must be a JSON object"},
		{"empty", ``, "empty"},
		{"only spaces", "  \n", "empty"},
		{"byte order mark", "\ufeff{\"model\":\"m\"}", "must be a JSON object"},
		{"two objects", `{"model":"a"}{"model":"b"}`, "data after the JSON object"},
		{"trailing comma", `{"model":"m",}`, "expected a string key"},
		{"comment", `{"model":"m" /* x */}`, "expected ',' or '}'"},
		{"single quotes", `{'model':'m'}`, "expected a string key"},
		{"unquoted key", `{model:"m"}`, "expected a string key"},
		{"raw newline in a string", "{\"model\":\"m\n\"}", "control character"},
		{"bad escape", `{"model":"m\x41"}`, "invalid escape"},
		{"short \\u escape", `{"model":"m\u12"}`, `invalid \u escape`},
		{"leading zero", `{"model":"m","t":01}`, "expected ',' or '}'"},
		{"lone minus", `{"model":"m","t":-}`, "invalid number"},
		{"dot without digits", `{"model":"m","t":1.}`, "invalid number"},
		{"exponent without digits", `{"model":"m","t":1e}`, "invalid number"},
		{"truncated", `{"model":"m"`, "unexpected end"},
		{"truncated literal", `{"model":"m","stream":tru`, "invalid literal"},
		{"case variant of model", `{"model":"cheap","Model":"expensive"}`, `"Model" is not a field of this API; did you mean model?`},
		{"case variant of max_tokens", `{"model":"m","MAX_TOKENS":99999}`, `did you mean max_tokens?`},
		{"api_base", `{"model":"m","api_base":"http://169.254.169.254"}`, `"api_base" may not be set in the body`},
		{"base_url", `{"model":"m","base_url":"http://evil"}`, `"base_url" may not be set`},
		{"api_key", `{"model":"m","api_key":"sk-other"}`, `"api_key" may not be set`},
		{"API-Key", `{"model":"m","API-Key":"sk-other"}`, `"API-Key" may not be set`},
		{"apiBase", `{"model":"m","apiBase":"http://evil"}`, `"apiBase" may not be set`},
		{"no model", `{"max_tokens":1}`, "model is required"},
		{"empty model", `{"model":""}`, `model must be a non-empty string, got ""`},
		{"null model", `{"model":null}`, "model must be a non-empty string, got null"},
		{"number model", `{"model":4}`, "model must be a non-empty string, got 4"},
		{"array model", `{"model":["a","b"]}`, `model must be a non-empty string, got ["a","b"]`},
		{"control character in model", `{"model":"a\u0000b"}`, "model must not contain control characters"},
		{"huge model", `{"model":"` + strings.Repeat("m", 257) + `"}`, "model must be at most 256 bytes"},
		{"string stream", `{"model":"m","stream":"true"}`, `stream must be true or false, got "true"`},
		{"numeric stream", `{"model":"m","stream":1}`, "stream must be true or false, got 1"},
	}
	for _, tt := range tests {
		_, err := estimate.Parse(estimate.AnthropicMessages, []byte(tt.body))
		if !errors.Is(err, estimate.ErrInvalid) || estimate.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want a 400 saying %q", tt.name, err, tt.want)
		}
		if err == nil {
			continue
		}
		if _, ok := errors.AsType[*estimate.BodyError](err); !ok {
			t.Errorf("%s: err is %T, want a *estimate.BodyError", tt.name, err)
		}
	}
	for _, body := range []string{deep(64), deepObj(64), `{"model":"m","x":{` + manyKeys(1000) + `}}`} {
		if _, err := estimate.Parse(estimate.AnthropicMessages, []byte(body)); err != nil {
			t.Errorf("valid body (%d bytes) refused: %v", len(body), err)
		}
	}
	chat := map[string]string{
		`{"model":"m","stream_options":true}`:                      "stream_options must be an object, got true",
		`{"model":"m","stream_options":{"include_usage":"yes"}}`:   `stream_options.include_usage must be true or false, got "yes"`,
		`{"model":"m","stream_options":{"include_usage":1},"n":1}`: "stream_options.include_usage must be true or false, got 1",
	}
	for body, want := range chat {
		if _, err := estimate.Parse(estimate.OpenAIChat, []byte(body)); estimate.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want a 400 saying %q", body, err, want)
		}
	}
	if _, err := estimate.Parse(estimate.Kind(0), []byte(`{"model":"m"}`)); err == nil || estimate.HTTPStatus(err) != 0 {
		t.Errorf("unknown kind: err = %v, want a programming error (status 0)", err)
	}
}

// A 10k-deep or 1000-key body is refused or read in linear time, not worse.
func TestParseHostileShapesAreFast(t *testing.T) {
	t.Parallel()
	bodies := []string{
		`{"model":"m","x":` + strings.Repeat("[", 1_000_000) + `}`,
		`{"model":"m","x":{` + manyKeys(50_000) + `}}`,
		`{"model":"m","x":"` + strings.Repeat(`\ud83d\ude00`, 100_000) + `"}`,
	}
	for _, body := range bodies {
		start := time.Now()
		estimate.Parse(estimate.AnthropicMessages, []byte(body))
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("a %d-byte body took %s", len(body), d)
		}
	}
}

// Every body Parse accepts, encoding/json reads the same way.
func TestParseAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, body := range parseSeeds() {
		for _, kind := range kinds {
			checkAgainstEncodingJSON(t, kind, []byte(body))
		}
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`":1`)
	}
	return b.String()
}
