package estimate_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/tollgate/tollgate/proxy/estimate"
)

var kinds = []estimate.Kind{estimate.AnthropicMessages, estimate.OpenAIChat, estimate.OpenAIResponses,
	estimate.OpenAIEmbeddings, estimate.OpenAICompletions}

func parseSeeds() []string {
	return []string{
		`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o","max_completion_tokens":50,"max_tokens":60,"stream":true,"stream_options":{"include_usage":true},"n":2}`,
		`{"model":"gpt-4o","max_output_tokens":300,"stream":false,"input":[{"role":"user","content":"x"}]}`,
		`{"model":"text-embedding-3-small","input":["a","b"]}`,
		`{"model":"gpt-3.5-turbo-instruct","prompt":"x","max_tokens":16,"n":2,"best_of":5}`,
		`{"model":"m","max_tokens":null,"stream":null,"stream_options":null,"n":null,"best_of":null}`,
		`{"model":"mod\u0065l","x":"\ud83d\ude00\n\"","y":[1,-2.5e+3,true,false,null,{}],"z":{"a":{"b":[]}}}`,
		`{"model":"m","max_tokens":2147483648}`,
		`{"model":"m","max_tokens":2147483649}`,
		`{"model":"m","max_tokens":1.0}`,
		`{"model":"a","model":"b"}`,
		`{"model":"a","Model":"b"}`,
		`{"model":"a","max_to\u212aens":5}`, // Kelvin sign: encoding/json folds it to k
		`{"model":"a","ſtream":true}`,       // long s: folds to s
		`{"model":"a","stream_options":{"INCLUDE_USAGE":true}}`,
		`{"model":"a","api_key":"x"}`,
		`{"model":"a","t":NaN}`,
		"{\"model\":\"a\xff\"}",
		`{"model":"a","x":"\ud800"}`,
		`[1]`,
		``,
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range parseSeeds() {
		for _, k := range kinds {
			f.Add(uint8(k), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		kind := estimate.Kind(k%uint8(len(kinds))) + estimate.AnthropicMessages
		checkAgainstEncodingJSON(t, kind, body)
	})
}

// checkAgainstEncodingJSON parses body and, when Parse accepts it, checks that
// encoding/json (which matches field names without case) reads the same values.
func checkAgainstEncodingJSON(t *testing.T, kind estimate.Kind, body []byte) {
	t.Helper()
	r, err := estimate.Parse(kind, body)
	if err != nil {
		if estimate.HTTPStatus(err) != 400 {
			t.Fatalf("Parse(%v, %q): err %v is not a 400", kind, body, err)
		}
		if _, ok := err.(*estimate.BodyError); !ok {
			t.Fatalf("Parse(%v, %q): err is %T, want *estimate.BodyError", kind, body, err)
		}
		return
	}
	again, err := estimate.Parse(kind, body)
	if err != nil || again != r {
		t.Fatalf("Parse(%v, %q) twice: %+v then %+v, %v", kind, body, r, again, err)
	}
	if !json.Valid(body) {
		t.Fatalf("Parse(%v) accepted %q, which encoding/json calls invalid", kind, body)
	}
	var v struct {
		Model               any             `json:"model"`
		MaxTokens           any             `json:"max_tokens"`
		MaxCompletionTokens any             `json:"max_completion_tokens"`
		MaxOutputTokens     any             `json:"max_output_tokens"`
		Stream              any             `json:"stream"`
		StreamOptions       json.RawMessage `json:"stream_options"`
		N                   any             `json:"n"`
		BestOf              any             `json:"best_of"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("Parse(%v) accepted %q; encoding/json: %v", kind, body, err)
	}
	fail := func(what string, got, want any) {
		t.Helper()
		t.Fatalf("Parse(%v, %q): %s = %v, encoding/json reads %v", kind, body, what, got, want)
	}
	if v.Model != r.Model {
		fail("model", r.Model, v.Model)
	}
	if r.InputTokens != estimate.EstimateInputTokens(body) {
		fail("input tokens", r.InputTokens, estimate.EstimateInputTokens(body))
	}
	num := func(x any) int64 {
		if x == nil {
			return 0
		}
		n, err := strconv.ParseInt(string(x.(json.Number)), 10, 64)
		if err != nil {
			t.Fatalf("Parse(%v, %q) accepted the number %v: %v", kind, body, x, err)
		}
		return n
	}
	var ceiling, choices int64
	switch kind {
	case estimate.AnthropicMessages:
		ceiling = num(v.MaxTokens)
	case estimate.OpenAIChat:
		ceiling, choices = max(num(v.MaxCompletionTokens), num(v.MaxTokens)), num(v.N)
	case estimate.OpenAIResponses:
		ceiling = num(v.MaxOutputTokens)
	case estimate.OpenAICompletions:
		ceiling, choices = num(v.MaxTokens), max(num(v.N), num(v.BestOf))
	case estimate.OpenAIEmbeddings:
		if r.Stream || r.MaxOutputTokens != 0 || r.IncludeUsage {
			fail("stream, ceiling or include_usage of an embedding", r, "none")
		}
		return
	}
	if r.MaxOutputTokens != ceiling {
		fail("output ceiling", r.MaxOutputTokens, ceiling)
	}
	if r.Choices != max(choices, 1) {
		fail("choices", r.Choices, max(choices, 1))
	}
	if r.Stream != (v.Stream == true) {
		fail("stream", r.Stream, v.Stream)
	}
	if kind == estimate.OpenAIChat || kind == estimate.OpenAICompletions {
		var so struct {
			IncludeUsage any `json:"include_usage"`
		}
		if len(v.StreamOptions) > 0 && string(v.StreamOptions) != "null" {
			if err := json.Unmarshal(v.StreamOptions, &so); err != nil {
				t.Fatalf("Parse(%v) accepted stream_options %s: %v", kind, v.StreamOptions, err)
			}
		}
		if r.IncludeUsage != (so.IncludeUsage == true) {
			fail("include_usage", r.IncludeUsage, so.IncludeUsage)
		}
	}
}
