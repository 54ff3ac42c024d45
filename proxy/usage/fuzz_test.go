package usage

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Plain `go test` runs these on their seeds. To explore:
//
//	go test -run '^$' -fuzz '^FuzzSSE$' -fuzztime 20s -fuzzminimizetime 1x ./proxy/usage/
//
// A short run needs -fuzzminimizetime: the default minimises each new input for up to
// a minute, so a 20-second run would do little else.

var fuzzKinds = []Kind{AnthropicMessages, OpenAIChat, OpenAIResponses, OpenAIEmbeddings, OpenAICompletions}

// addGoldens seeds f with every golden file whose name ends in suffix, for its kind.
func addGoldens(f *testing.F, suffix string) {
	names, err := filepath.Glob(filepath.Join("testdata", "*"+suffix))
	if err != nil || len(names) == 0 {
		f.Fatalf("no testdata/*%s: %v", suffix, err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		kind := byte(OpenAIChat)
		for _, g := range goldens {
			if g.file == filepath.Base(name) {
				kind = byte(g.kind)
			}
		}
		f.Add(kind, uint64(len(b)), b)
	}
}

func fuzzKind(k byte) Kind { return fuzzKinds[int(k)%len(fuzzKinds)] }

// checkTap passes body through a Tap in random pieces and in one, and requires the
// same bytes out and the same usage both ways.
func checkTap(t *testing.T, kind Kind, contentType string, seed uint64, body []byte) outcome {
	t.Helper()
	got, chunked := run(t, kind, contentType, newChunkReader(body, seed, 1+int(seed%97)))
	if !bytes.Equal(got, body) {
		t.Fatal("relayed bytes differ from the upstream's")
	}
	_, whole := run(t, kind, contentType, bytes.NewReader(body))
	if chunked != whole {
		t.Fatalf("chunked %+v, whole %+v", chunked, whole)
	}
	if chunked.Final && !chunked.Seen {
		t.Fatalf("impossible result %+v", chunked)
	}
	return chunked
}

func FuzzSSE(f *testing.F) {
	addGoldens(f, ".sse")
	for _, s := range []string{
		crlf(anthropicStart + anthropicDelta),
		strings.ReplaceAll(anthropicStart+anthropicDelta, "\n", "\r"),
		"\xEF\xBB\xBF" + anthropicStart + ": c\n" + strings.TrimRight(anthropicDelta, "\n"),
		chatText + chatUsage + "data: [DONE]\n\n",
		"event: response.completed\ndata: {\"response\":\ndata: {\"usage\":{\"input_tokens\":4}}}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\r\n\r\n",
	} {
		f.Add(byte(AnthropicMessages), uint64(len(s)), []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind byte, seed uint64, stream []byte) {
		checkTap(t, fuzzKind(kind), eventStream, seed, stream)
	})
}

func FuzzJSONUsage(f *testing.F) {
	addGoldens(f, ".json")
	for _, s := range []string{
		`{"usage":null}`, `{"usage":{"input_tokens":-1}}`, `{"usage":{"prompt_tokens":1e3}}`,
		`{"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":9}}}`,
		`{"usage":{"output_tokens":1},"usage":{"output_tokens":2}}`, `[{"usage":{}}]`,
	} {
		f.Add(byte(OpenAIChat), uint64(7), []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind byte, seed uint64, body []byte) {
		res := checkTap(t, fuzzKind(kind), appJSON, seed, body)
		if res.Seen != res.Final {
			t.Fatalf("a JSON body's usage is final or absent: %+v", res)
		}
		if res.Seen && !hasUsageObject(body) {
			t.Fatalf("usage %+v from a body without a usage object", res)
		}
	})
}

// hasUsageObject reports whether body is an object with a usage member, in exact
// case as the SDKs read it, that is an object.
func hasUsageObject(body []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	return bytes.HasPrefix(top["usage"], []byte("{"))
}

func FuzzInjectIncludeUsage(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"stream":true}`, `{}`, `{"stream":true,"stream_options":null}`,
		`{"stream":true,"stream_options":{"include_usage":false}}`, `[]`, ` {"stream" : true } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, changed, err := InjectIncludeUsage(body)
		if err != nil {
			return
		}
		if !changed {
			if !bytes.Equal(out, body) {
				t.Fatal("unchanged but different bytes")
			}
			return
		}
		var before, after map[string]json.RawMessage
		if err := json.Unmarshal(body, &before); err != nil {
			t.Fatalf("changed a body that is not an object: %v", err)
		}
		if err := json.Unmarshal(out, &after); err != nil || !json.Valid(out) {
			t.Fatalf("output is not a JSON object: %v\n%s", err, out)
		}
		var opts map[string]json.RawMessage
		if err := json.Unmarshal(after["stream_options"], &opts); err != nil || string(opts["include_usage"]) != "true" {
			t.Fatalf("include_usage not true in %s", out)
		}
		sameExcept(t, before, after, "stream_options")
		var optsBefore map[string]json.RawMessage
		if json.Unmarshal(before["stream_options"], &optsBefore) == nil {
			sameExcept(t, optsBefore, opts, "include_usage")
		}
		if len(after) != len(before) && len(after) != len(before)+1 {
			t.Fatalf("keys %d before, %d after", len(before), len(after))
		}
	})
}

// sameExcept requires every member of before but skip to be in after, unchanged.
func sameExcept(t *testing.T, before, after map[string]json.RawMessage, skip string) {
	t.Helper()
	for k, v := range before {
		if k != skip && !bytes.Equal(after[k], v) {
			t.Fatalf("%q changed from %s to %s", k, v, after[k])
		}
	}
}
