package mock_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/mockprovider/mock"
)

func start(t *testing.T, opts mock.Options) (*mock.Server, string) {
	t.Helper()
	m := mock.New(opts)
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return m, ts.URL
}

// do sends a request with header name/value pairs and returns the response, body read.
func do(t *testing.T, method, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	resp := open(t, context.Background(), method, url, body, header...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp, b
}

func open(t *testing.T, ctx context.Context, method, url, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

type sseEvent struct{ name, data string }

func readSSE(b []byte) []sseEvent {
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case line == "":
			events = append(events, cur)
			cur = sseEvent{}
		}
	}
	return events
}

func names(events []sseEvent) string {
	var n []string
	for _, e := range events {
		n = append(n, e.name)
	}
	return strings.Join(n, ",")
}

// onlyRecord returns the single record the server logged.
func onlyRecord(t *testing.T, m *mock.Server) mock.Record {
	t.Helper()
	recs := m.Records()
	if len(recs) != 1 {
		t.Fatalf("got %d records, want 1: %+v", len(recs), recs)
	}
	return recs[0]
}

func wantUsage(t *testing.T, rec mock.Record, want mock.Usage, reported bool) {
	t.Helper()
	if rec.Usage != want || rec.UsageReported != reported {
		t.Errorf("record usage = %+v reported=%v, want %+v reported=%v", rec.Usage, rec.UsageReported, want, reported)
	}
}

// 14 + 11 + 2 = 27 bytes of text: 7 input tokens.
const messagesBody = `{"model":"claude-test","max_tokens":%d,"stream":%t,"system":"You are terse.",
	"messages":[{"role":"user","content":"Hello there"},{"role":"assistant","content":[{"type":"text","text":"Hi"},{"type":"image","source":{}}]}]}`

func messagesReq(maxTokens int, stream bool) string {
	return fmt.Sprintf(messagesBody, maxTokens, stream)
}

func TestMessages(t *testing.T) {
	t.Parallel()
	cache := []string{"X-Mock-Cache-Read-Tokens", "3", "X-Mock-Cache-Write-Tokens", "2"}

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		m, url := start(t, mock.Options{})
		resp, b := do(t, "POST", url+"/v1/messages", messagesReq(100, false), cache...)
		msg := decode[struct {
			ID, Type, Role, Model, StopReason string
			Content                           []struct{ Type, Text string }
			Usage                             mock.Usage // its JSON names are Anthropic's
		}](t, b)
		if resp.StatusCode != 200 || msg.Type != "message" || msg.Model != "claude-test" || len(msg.Content) != 1 {
			t.Fatalf("status %d, body %s", resp.StatusCode, b)
		}
		if got := strings.Count(msg.Content[0].Text, "tok"); got != 16 {
			t.Errorf("text has %d tokens, want 16: %q", got, msg.Content[0].Text)
		}
		want := mock.Usage{InputTokens: 7, OutputTokens: 16, CacheCreationInputTokens: 2, CacheReadInputTokens: 3}
		if msg.Usage != want {
			t.Errorf("usage = %+v, want %+v", msg.Usage, want)
		}
		rec := onlyRecord(t, m)
		wantUsage(t, rec, want, true)
		if rec.ID != msg.ID || !strings.HasPrefix(rec.ID, "msg_") || rec.Model != "claude-test" || rec.Stream || rec.Status != 200 {
			t.Errorf("record = %+v", rec)
		}
	})

	t.Run("StreamCapped", func(t *testing.T) {
		t.Parallel()
		m, url := start(t, mock.Options{})
		resp, b := do(t, "POST", url+"/v1/messages", messagesReq(5, true), cache...)
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		events := readSSE(b)
		want := "message_start,content_block_start,ping," + strings.Repeat("content_block_delta,", 5) + "content_block_stop,message_delta,message_stop"
		if got := names(events); got != want {
			t.Fatalf("events %s, want %s", got, want)
		}
		var text string
		for _, e := range events {
			var d struct {
				Type  string
				Delta struct {
					Text       string
					StopReason string `json:"stop_reason"`
				}
				Usage mock.Usage
			}
			if err := json.Unmarshal([]byte(e.data), &d); err != nil || d.Type != e.name {
				t.Fatalf("event %s data %s: %v", e.name, e.data, err)
			}
			text += d.Delta.Text
			if e.name == "message_delta" {
				wantU := mock.Usage{InputTokens: 7, OutputTokens: 5, CacheCreationInputTokens: 2, CacheReadInputTokens: 3}
				if d.Delta.StopReason != "max_tokens" || d.Usage != wantU {
					t.Errorf("message_delta = %s", e.data)
				}
				wantUsage(t, onlyRecord(t, m), wantU, true)
			}
		}
		if text != "tok tok tok tok tok" {
			t.Errorf("text %q", text)
		}
	})
}

type openAIUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u openAIUsage) mock() mock.Usage {
	return mock.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.PromptTokensDetails.CachedTokens, ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens}
}

func TestChatCompletions(t *testing.T) {
	t.Parallel()
	// 8 + 4 bytes of text: 3 tokens, plus 2 cached; 16 text tokens plus 4 reasoning.
	const messages = `"model":"gpt-test","messages":[{"role":"system","content":"abcdefgh"},{"role":"user","content":[{"type":"text","text":"abcd"}]}]`
	knobs := []string{"X-Mock-Cache-Read-Tokens", "2", "X-Mock-Reasoning-Tokens", "4"}
	want := mock.Usage{InputTokens: 5, OutputTokens: 20, CacheReadInputTokens: 2, ReasoningTokens: 4}

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		m, url := start(t, mock.Options{})
		_, b := do(t, "POST", url+"/v1/chat/completions", `{`+messages+`}`, knobs...)
		c := decode[struct {
			ID, Object string
			Choices    []struct {
				Message      struct{ Role, Content string }
				FinishReason string `json:"finish_reason"`
			}
			Usage openAIUsage
		}](t, b)
		if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].FinishReason != "stop" || strings.Count(c.Choices[0].Message.Content, "tok") != 16 {
			t.Fatalf("body %s", b)
		}
		if c.Usage.mock() != want || c.Usage.TotalTokens != 25 {
			t.Errorf("usage %+v, want %+v", c.Usage, want)
		}
		rec := onlyRecord(t, m)
		wantUsage(t, rec, want, true)
		if rec.ID != c.ID || !strings.HasPrefix(rec.ID, "chatcmpl-") {
			t.Errorf("record id %q, response id %q", rec.ID, c.ID)
		}
	})

	for _, include := range []bool{false, true} {
		t.Run(fmt.Sprint("StreamIncludeUsage=", include), func(t *testing.T) {
			t.Parallel()
			m, url := start(t, mock.Options{})
			body := fmt.Sprintf(`{%s,"stream":true,"max_completion_tokens":3,"stream_options":{"include_usage":%t}}`, messages, include)
			_, b := do(t, "POST", url+"/v1/chat/completions", body, knobs...)
			events := readSSE(b)
			if events[len(events)-1].data != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %s", b)
			}
			var text, finish string
			var got, want mock.Usage
			for i, e := range events[:len(events)-1] {
				c := decode[struct {
					Object  string
					Choices []struct {
						Delta        struct{ Content string }
						FinishReason string `json:"finish_reason"`
					}
					Usage *openAIUsage
				}](t, []byte(e.data))
				if c.Object != "chat.completion.chunk" || e.name != "" {
					t.Fatalf("chunk %+v", e)
				}
				for _, ch := range c.Choices {
					text, finish = text+ch.Delta.Content, finish+ch.FinishReason
				}
				if c.Usage != nil {
					if len(c.Choices) != 0 || i != len(events)-2 {
						t.Errorf("usage in chunk %d of %d: %s", i, len(events), e.data)
					}
					got = c.Usage.mock()
				}
			}
			if include {
				want = mock.Usage{InputTokens: 5, OutputTokens: 7, CacheReadInputTokens: 2, ReasoningTokens: 4}
			}
			if text != "tok tok tok" || finish != "length" || got != want {
				t.Errorf("text %q, finish %q, usage %+v, want usage %+v", text, finish, got, want)
			}
			wantUsage(t, onlyRecord(t, m), want, include)
		})
	}
}

type response struct {
	ID, Object, Status string
	Output             []struct {
		Type    string
		Content []struct{ Type, Text string }
	}
	Usage *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	}
}

func TestResponses(t *testing.T) {
	t.Parallel()
	// 5 + 8 bytes of text: 4 tokens.
	const input = `"model":"gpt-test","instructions":"terse","input":[{"role":"user","content":[{"type":"input_text","text":"hi there"}]}]`

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		m, url := start(t, mock.Options{OutputTokens: 4})
		_, b := do(t, "POST", url+"/v1/responses", `{`+input+`}`)
		r := decode[response](t, b)
		if r.Object != "response" || r.Status != "completed" || len(r.Output) != 1 || r.Output[0].Content[0].Text != "tok tok tok tok" {
			t.Fatalf("body %s", b)
		}
		if u := r.Usage; u == nil || u.InputTokens != 4 || u.OutputTokens != 4 || u.TotalTokens != 8 {
			t.Errorf("usage %+v", u)
		}
		rec := onlyRecord(t, m)
		wantUsage(t, rec, mock.Usage{InputTokens: 4, OutputTokens: 4}, true)
		if rec.ID != r.ID || !strings.HasPrefix(r.ID, "resp_") {
			t.Errorf("record id %q, response id %q", rec.ID, r.ID)
		}
	})

	t.Run("StreamIncomplete", func(t *testing.T) {
		t.Parallel()
		m, url := start(t, mock.Options{})
		_, b := do(t, "POST", url+"/v1/responses", `{`+input+`,"stream":true,"max_output_tokens":2}`)
		events := readSSE(b)
		want := "response.created,response.output_item.added,response.content_part.added," +
			"response.output_text.delta,response.output_text.delta,response.output_text.done," +
			"response.content_part.done,response.output_item.done,response.incomplete"
		if got := names(events); got != want {
			t.Fatalf("events %s, want %s", got, want)
		}
		var text string
		for i, e := range events {
			d := decode[struct {
				Type     string
				Sequence int `json:"sequence_number"`
				Delta    string
				Response response
			}](t, []byte(e.data))
			if d.Type != e.name || d.Sequence != i {
				t.Errorf("event %d: %s", i, e.data)
			}
			text += d.Delta
			if i == len(events)-1 && (d.Response.Status != "incomplete" || d.Response.Usage == nil || d.Response.Usage.OutputTokens != 2) {
				t.Errorf("final event %s", e.data)
			}
		}
		if text != "tok tok" {
			t.Errorf("text %q", text)
		}
		wantUsage(t, onlyRecord(t, m), mock.Usage{InputTokens: 4, OutputTokens: 2}, true)
	})
}

func TestEmbeddingsAndModels(t *testing.T) {
	t.Parallel()
	m, url := start(t, mock.Options{})
	_, b := do(t, "POST", url+"/v1/embeddings", `{"model":"text-embedding-3-small","input":["abcd","abcdefgh"]}`)
	e := decode[struct {
		Data []struct {
			Index     int
			Embedding []float64
		}
		Usage openAIUsage
	}](t, b)
	if len(e.Data) != 2 || e.Data[1].Index != 1 || len(e.Data[0].Embedding) != 8 || e.Usage.PromptTokens != 3 || e.Usage.TotalTokens != 3 {
		t.Fatalf("body %s", b)
	}

	resp, b := do(t, "GET", url+"/v1/models", "")
	models := decode[struct {
		Data []struct{ ID, Object, Type string }
	}](t, b)
	if resp.StatusCode != 200 || len(models.Data) == 0 || models.Data[0].Object != "model" || models.Data[0].Type != "model" {
		t.Fatalf("models %s", b)
	}

	recs := m.Records()
	if len(recs) != 2 || recs[0].Path != "/v1/embeddings" || recs[1].Path != "/v1/models" {
		t.Fatalf("records %+v", recs)
	}
	wantUsage(t, recs[0], mock.Usage{InputTokens: 3}, true)
}

func TestCredentials(t *testing.T) {
	t.Parallel()
	m, url := start(t, mock.Options{AnthropicKey: "sk-ant-real", OpenAIKey: "sk-oai-real"})
	cases := []struct {
		path   string
		header []string
		status int
	}{
		{"/v1/messages", nil, 401},
		{"/v1/messages", []string{"X-Api-Key", "sk-ant-wrong"}, 401},
		{"/v1/messages", []string{"Authorization", "Bearer sk-ant-real"}, 401},
		{"/v1/messages", []string{"X-Api-Key", "sk-ant-real"}, 200},
		{"/v1/chat/completions", []string{"Authorization", "Bearer sk-oai-wrong"}, 401},
		{"/v1/chat/completions", []string{"X-Api-Key", "sk-oai-real"}, 401},
		{"/v1/chat/completions", []string{"Authorization", "Bearer sk-oai-real"}, 200},
	}
	for i, c := range cases {
		resp, b := do(t, "POST", url+c.path, `{"model":"x","max_tokens":1}`, c.header...)
		if resp.StatusCode != c.status {
			t.Errorf("%s %v: status %d, want %d", c.path, c.header, resp.StatusCode, c.status)
		}
		if c.status == 401 {
			wantErrorShape(t, c.path == "/v1/messages", "authentication_error", b)
		}
		if bytes.Contains(b, []byte("sk-")) {
			t.Errorf("response reflects the credential: %s", b)
		}
		rec := m.Records()[i]
		if rec.Status != c.status || rec.UsageReported != (c.status == 200) {
			t.Errorf("record %d = %+v", i, rec)
		}
	}
	recs := m.Records()
	if recs[3].APIKeyHeader != "sk-ant-real" || recs[6].AuthHeader != "Bearer sk-oai-real" || recs[6].Headers.Get("Authorization") != "Bearer sk-oai-real" {
		t.Errorf("credentials not recorded: %+v %+v", recs[3], recs[6])
	}
}

// wantErrorShape checks an error body is in the provider's shape; typ is checked for Anthropic only.
func wantErrorShape(t *testing.T, anthropic bool, typ string, b []byte) {
	t.Helper()
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" {
		t.Fatalf("error body %s: %v", b, err)
	}
	if anthropic && (e.Type != "error" || e.Error.Type != typ) {
		t.Errorf("Anthropic error %s, want type %s", b, typ)
	}
	if !anthropic && (e.Type != "" || !bytes.Contains(b, []byte(`"param":null`))) {
		t.Errorf("OpenAI error %s", b)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	m, url := start(t, mock.Options{})
	cases := []struct {
		name, path, body string
		header           []string
		status           int
		anthropicType    string
	}{
		{"BadJSONAnthropic", "/v1/messages", `{"model":`, nil, 400, "invalid_request_error"},
		{"BadJSONOpenAI", "/v1/chat/completions", `[1]`, nil, 400, ""},
		{"UnknownPath", "/v1/nope", `{}`, nil, 404, ""},
		// An Anthropic SDK's 404 must parse as an Anthropic error, whatever the path.
		{"UnknownMessagesPath", "/v1/messages/batches", `{}`, nil, 404, "not_found_error"},
		{"UnknownPathAnthropicCaller", "/v1/complete", `{}`, []string{"X-Api-Key", "k", "Anthropic-Version", "2023-06-01"}, 404, "not_found_error"},
		{"BadJSONCountTokens", "/v1/messages/count_tokens", `{"model":`, nil, 400, "invalid_request_error"},
		{"BadKnob", "/v1/messages", `{}`, []string{"X-Mock-Output-Tokens", "many"}, 400, "invalid_request_error"},
		{"RateLimited", "/v1/chat/completions", `{"model":"gpt-test","stream":true}`, []string{"X-Mock-Fail-Status", "429"}, 429, ""},
		{"Overloaded", "/v1/messages", `{"model":"claude-test"}`, []string{"X-Mock-Fail-Status", "529"}, 529, "overloaded_error"},
		{"ServerError", "/v1/messages", `{}`, []string{"X-Mock-Fail-Status", "500"}, 500, "api_error"},
	}
	for i, c := range cases {
		resp, b := do(t, "POST", url+c.path, c.body, c.header...)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.status, b)
			continue
		}
		wantErrorShape(t, c.anthropicType != "", c.anthropicType, b)
		retry := c.status == 429 || c.status == 529
		if (resp.Header.Get("Retry-After") == "1") != retry {
			t.Errorf("%s: Retry-After %q", c.name, resp.Header.Get("Retry-After"))
		}
		rec := m.Records()[i]
		if rec.Status != c.status || rec.UsageReported || rec.Usage != (mock.Usage{}) || rec.Path != c.path {
			t.Errorf("%s: record %+v", c.name, rec)
		}
	}
}

// TestCountTokens is the Anthropic SDK's messages.countTokens: the input tokens
// a message with that prompt would be billed for, and no usage in the log,
// since the API does not charge for counting.
func TestCountTokens(t *testing.T) {
	t.Parallel()
	m, url := start(t, mock.Options{AnthropicKey: "k"})
	req := `{"model":"claude-sonnet-4-6","system":"abcd","messages":[{"role":"user","content":"abcdefgh"}]}`
	resp, b := do(t, "POST", url+"/v1/messages/count_tokens", req, "X-Api-Key", "k")
	if got := decode[struct {
		InputTokens int64 `json:"input_tokens"`
	}](t, b); resp.StatusCode != 200 || got.InputTokens != 3 {
		t.Fatalf("count_tokens = %d %s, want 200 with input_tokens 3", resp.StatusCode, b)
	}
	_, b = do(t, "POST", url+"/v1/messages", req, "X-Api-Key", "k")
	if got := decode[struct {
		Usage struct {
			InputTokens int64 `json:"input_tokens"`
		}
	}](t, b); got.Usage.InputTokens != 3 {
		t.Errorf("the message bills %d input tokens, count_tokens said 3: %s", got.Usage.InputTokens, b)
	}
	if rec := m.Records()[0]; rec.Path != "/v1/messages/count_tokens" || rec.Status != 200 || rec.UsageReported || rec.Usage != (mock.Usage{}) {
		t.Errorf("count_tokens record %+v, want a 200 without usage", rec)
	}
	if resp, b := do(t, "POST", url+"/v1/messages/count_tokens", req, "X-Api-Key", "wrong"); resp.StatusCode != 401 {
		t.Errorf("wrong key: %d %s, want 401", resp.StatusCode, b)
	} else {
		wantErrorShape(t, true, "authentication_error", b)
	}
}

func TestDisconnectAfterEvents(t *testing.T) {
	t.Parallel()
	m, url := start(t, mock.Options{})
	resp := open(t, context.Background(), "POST", url+"/v1/messages", messagesReq(100, true), "X-Mock-Disconnect-After-Events", "3")
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error %v, want unexpected EOF", err)
	}
	if got := names(readSSE(b)); got != "message_start,content_block_start,ping" {
		t.Errorf("events %s", got)
	}
	rec := onlyRecord(t, m)
	// The client saw message_start's partial count, never the final one.
	wantUsage(t, rec, mock.Usage{InputTokens: 7, OutputTokens: 1}, false)
	if !rec.Disconnected || rec.Status != 200 {
		t.Errorf("record %+v", rec)
	}
}

func TestClientDisconnect(t *testing.T) {
	t.Parallel()
	m, url := start(t, mock.Options{EventInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	resp := open(t, ctx, "POST", url+"/v1/chat/completions", `{"stream":true,"stream_options":{"include_usage":true}}`, "X-Mock-Output-Tokens", "1000")
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()

	deadline := time.Now().Add(5 * time.Second)
	for len(m.Records()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rec := onlyRecord(t, m)
	if !rec.Disconnected || rec.UsageReported {
		t.Errorf("record %+v", rec)
	}
}

func TestOmitUsage(t *testing.T) {
	t.Parallel()
	m, url := start(t, mock.Options{})
	omit := []string{"X-Mock-Omit-Usage", "1"}
	_, b := do(t, "POST", url+"/v1/chat/completions", `{"model":"gpt-test"}`, omit...)
	if !bytes.Contains(b, []byte(`"usage":null`)) {
		t.Errorf("chat body %s", b)
	}
	_, b = do(t, "POST", url+"/v1/messages", messagesReq(100, true), omit...)
	for _, e := range readSSE(b) {
		if strings.Contains(e.data, "input_tokens") {
			t.Errorf("usage in %s: %s", e.name, e.data)
		}
	}
	for _, rec := range m.Records() {
		wantUsage(t, rec, mock.Usage{}, false)
	}
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	var bodies [2]string
	for i := range bodies {
		m, url := start(t, mock.Options{OutputTokens: 9})
		_, b := do(t, "POST", url+"/v1/messages", messagesReq(100, false), "X-Mock-Cache-Read-Tokens", "11")
		rec := onlyRecord(t, m)
		bodies[i] = strings.ReplaceAll(string(b), rec.ID, "ID")
		wantUsage(t, rec, mock.Usage{InputTokens: 7, OutputTokens: 9, CacheReadInputTokens: 11}, true)
	}
	if bodies[0] != bodies[1] {
		t.Errorf("responses differ:\n%s\n%s", bodies[0], bodies[1])
	}
}

func TestRecordsEndpointAndLog(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	m, url := start(t, mock.Options{LogWriter: &log})
	do(t, "POST", url+"/v1/embeddings", `{"input":"abc"}`, "X-Api-Key", "k")

	_, b := do(t, "GET", url+"/_mock/records", "")
	recs := decode[[]mock.Record](t, b)
	if len(recs) != 1 || recs[0].Path != "/v1/embeddings" || recs[0].APIKeyHeader != "k" || recs[0].BodyBytes != 15 {
		t.Fatalf("records %s", b)
	}
	m.Records() // the server writes the log under the lock this takes, so reading it is ordered after
	line := decode[mock.Record](t, log.Bytes())
	if line.Usage != recs[0].Usage || line.Path != "/v1/embeddings" {
		t.Errorf("log line %s", log.Bytes())
	}

	resp, _ := do(t, "POST", url+"/_mock/reset", "")
	if resp.StatusCode != http.StatusNoContent || len(m.Records()) != 0 {
		t.Errorf("reset: status %d, %d records left", resp.StatusCode, len(m.Records()))
	}
}

// TestNoRecords: a mock told to keep no records still writes its log file, holds
// nothing in memory, and says so on /_mock/records rather than answering an
// empty list that reads as "no requests".
func TestNoRecords(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	m, url := start(t, mock.Options{LogWriter: &log, NoRecords: true})
	if resp, _ := do(t, "POST", url+"/v1/embeddings", `{"input":"abc"}`, "X-Api-Key", "k"); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if recs := m.Records(); len(recs) != 0 {
		t.Errorf("%d records kept", len(recs))
	}
	if line := decode[mock.Record](t, log.Bytes()); line.Path != "/v1/embeddings" {
		t.Errorf("log line %s", log.Bytes())
	}
	if resp, b := do(t, "GET", url+"/_mock/records", ""); resp.StatusCode != http.StatusNotFound || !bytes.Contains(b, []byte("keeps no records")) {
		t.Errorf("records endpoint: %d %s", resp.StatusCode, b)
	}
}
