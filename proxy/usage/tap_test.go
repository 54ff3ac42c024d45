package usage

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// goldens are real-shaped provider responses and the usage they must settle to.
var goldens = []struct {
	file string
	kind Kind
	want outcome
}{
	{"anthropic_stream.sse", AnthropicMessages, outcome{Usage{InputTokens: 2095, CacheWriteTokens: 1024, CacheReadTokens: 8192, OutputTokens: 503}, true, true, ""}},
	{"anthropic_thinking_stream.sse", AnthropicMessages, outcome{Usage{InputTokens: 52, CacheReadTokens: 1800, OutputTokens: 1210, ReasoningTokens: 880}, true, true, ""}},
	{"anthropic_error_stream.sse", AnthropicMessages, outcome{Usage{InputTokens: 52, CacheReadTokens: 1800, OutputTokens: 3}, true, false, "overloaded_error"}},
	{"anthropic_message.json", AnthropicMessages, outcome{Usage{InputTokens: 2095, CacheWriteTokens: 2051, OutputTokens: 503}, true, true, ""}},
	{"openai_chat_stream.sse", OpenAIChat, outcome{Usage{InputTokens: 93, CacheReadTokens: 1024, OutputTokens: 246, ReasoningTokens: 192}, true, true, ""}},
	{"openai_chat_stream_no_usage.sse", OpenAIChat, outcome{}},
	{"openai_chat.json", OpenAIChat, outcome{Usage{InputTokens: 86, CacheReadTokens: 1920, OutputTokens: 300, ReasoningTokens: 256}, true, true, ""}},
	{"openai_responses_stream.sse", OpenAIResponses, outcome{Usage{InputTokens: 1072, CacheReadTokens: 2048, OutputTokens: 740, ReasoningTokens: 640}, true, true, ""}},
	{"openai_responses.json", OpenAIResponses, outcome{Usage{InputTokens: 1072, CacheReadTokens: 2048, OutputTokens: 740, ReasoningTokens: 640}, true, true, ""}},
	{"openai_embeddings.json", OpenAIEmbeddings, outcome{Usage{InputTokens: 8}, true, true, ""}},
	{"openai_completions.json", OpenAICompletions, outcome{Usage{InputTokens: 5, OutputTokens: 7}, true, true, ""}},
}

func contentTypeOf(file string) string {
	if strings.HasSuffix(file, ".sse") {
		return eventStream
	}
	return appJSON
}

// TestTapGolden checks every golden response under every line ending and chunking:
// the client gets the upstream's bytes, and the usage is the same.
func TestTapGolden(t *testing.T) {
	t.Parallel()
	for _, g := range goldens {
		t.Run(g.file, func(t *testing.T) {
			t.Parallel()
			endings := map[string]string{"LF": "\n"}
			if strings.HasSuffix(g.file, ".sse") {
				endings["CRLF"], endings["CR"] = "\r\n", "\r"
			}
			for name, eol := range endings {
				body := bytes.ReplaceAll(golden(t, g.file), []byte("\n"), []byte(eol))
				for _, size := range []int{1, 2, 7, 64, 4096, len(body)} {
					for seed := range uint64(3) {
						got, res := run(t, g.kind, contentTypeOf(g.file), newChunkReader(body, seed, size))
						if !bytes.Equal(got, body) {
							t.Fatalf("%s pieces of %d: the client got other bytes than the upstream sent", name, size)
						}
						if res != g.want {
							t.Fatalf("%s pieces of %d, seed %d: got %+v, want %+v", name, size, seed, res, g.want)
						}
					}
				}
			}
		})
	}
}

// anthropicStart and anthropicDelta are the two usage events of an Anthropic stream.
const (
	anthropicStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":20,\"cache_read_input_tokens\":30,\"output_tokens\":1}}}\n\n"
	anthropicDelta = "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40}}\n\n"
	anthropicText  = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
	chatUsage      = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":20},\"completion_tokens_details\":{\"reasoning_tokens\":3}}}\n\n"
	chatText       = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n"
)

var (
	anthropicFinal   = outcome{Usage{InputTokens: 10, CacheWriteTokens: 20, CacheReadTokens: 30, OutputTokens: 40}, true, true, ""}
	anthropicPartial = outcome{Usage{InputTokens: 10, CacheWriteTokens: 20, CacheReadTokens: 30, OutputTokens: 1}, true, false, ""}
	chatFinal        = outcome{Usage{InputTokens: 30, CacheReadTokens: 20, OutputTokens: 7, ReasoningTokens: 3}, true, true, ""}
)

// TestTapHostileSSE covers HOSTILE item 24: whatever the shape of the stream, it is
// relayed as sent and its usage is read, or none is claimed.
func TestTapHostileSSE(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 5<<20)
	cases := []struct {
		name   string
		kind   Kind
		stream string
		want   outcome
	}{
		{"LF", AnthropicMessages, anthropicStart + anthropicText + anthropicDelta, anthropicFinal},
		{"CRLF", AnthropicMessages, crlf(anthropicStart + anthropicText + anthropicDelta), anthropicFinal},
		{"CR", AnthropicMessages, strings.ReplaceAll(anthropicStart+anthropicText+anthropicDelta, "\n", "\r"), anthropicFinal},
		{"MixedEndings", AnthropicMessages, "event: message_start\r\ndata: {\"message\":{\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":20,\"cache_read_input_tokens\":30,\"output_tokens\":1}}}\r\r" + "event: message_delta\rdata: {\"usage\":{\"output_tokens\":40}}\n\n", anthropicFinal},
		{"Comments", AnthropicMessages, ": keep-alive\n\n" + strings.Replace(anthropicStart, "data:", ": OPENROUTER PROCESSING\ndata:", 1) + ":\n" + anthropicDelta, anthropicFinal},
		{"MultiLineData", AnthropicMessages, anthropicStart + "event: message_delta\ndata: {\"type\":\"message_delta\",\ndata: \"usage\":{\"output_tokens\":40}}\n\n", anthropicFinal},
		{"DataWithoutSpace", AnthropicMessages, strings.ReplaceAll(anthropicStart+anthropicDelta, "data: ", "data:"), anthropicFinal},
		{"FiveMBDataLine", AnthropicMessages, anthropicStart + "event: content_block_delta\ndata: {\"delta\":{\"text\":\"" + big + "\"}}\n\n" + anthropicDelta, anthropicFinal},
		{"FiveMBChatChunk", OpenAIChat, "data: {\"choices\":[{\"delta\":{\"content\":\"" + big + "\"}}],\"usage\":null}\n\n" + chatUsage, chatFinal},
		{"NoTrailingNewline", AnthropicMessages, anthropicStart + strings.TrimRight(anthropicDelta, "\n"), anthropicFinal},
		{"NoTrailingNewlineCR", AnthropicMessages, anthropicStart + strings.TrimRight(anthropicDelta, "\n") + "\r", anthropicFinal},
		{"UnknownEvents", AnthropicMessages, "event: surprise\ndata: {\"usage\":{\"output_tokens\":999}}\n\n" + anthropicStart + "event: message_delta_v2\ndata: {\"usage\":{\"output_tokens\":999}}\n\n" + anthropicDelta + "event: message_stop\ndata: {}\n\n", anthropicFinal},
		{"IDAndRetryFields", AnthropicMessages, "id: 1\nretry: 100\n" + anthropicStart + "id: 2\n" + anthropicDelta, anthropicFinal},
		{"AnthropicErrorMidStream", AnthropicMessages, anthropicStart + anthropicText + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", withErr(anthropicPartial, "overloaded_error")},
		{"ChatErrorMidStream", OpenAIChat, chatText + "data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"code\":null}}\n\n", outcome{StreamErr: "server_error"}},
		{"ResponsesErrorEvent", OpenAIResponses, "event: error\ndata: {\"type\":\"error\",\"code\":\"ERR_SOMETHING\",\"message\":\"Something went wrong\",\"param\":null,\"sequence_number\":1}\n\n", outcome{StreamErr: "ERR_SOMETHING"}},
		{"ChatNoDone", OpenAIChat, chatText + chatUsage, chatFinal},
		{"ChatDoneOnly", OpenAIChat, chatText + "data: [DONE]\n\n", outcome{}},
		{"LeadingBOM", AnthropicMessages, "\xEF\xBB\xBF" + anthropicStart + anthropicDelta, anthropicFinal},
		{"Empty", AnthropicMessages, "", outcome{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, size := range []int{1, 3, 1000, 32 << 10, len(c.stream) + 1} {
				if size < 1000 && len(c.stream) > 1<<20 {
					continue // a few bytes at a time through 5 MB adds time, not coverage
				}
				got, res := run(t, c.kind, eventStream, newChunkReader([]byte(c.stream), uint64(size), size))
				if string(got) != c.stream {
					t.Fatalf("pieces of %d: relayed bytes differ from the upstream's", size)
				}
				if res != c.want {
					t.Fatalf("pieces of %d: got %+v, want %+v", size, res, c.want)
				}
			}
		})
	}
}

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

func withErr(o outcome, name string) outcome {
	o.StreamErr = name
	return o
}

// TestTapSettlement covers HOSTILE items 11 to 13: each token class read apart, and
// streams that end without the final usage never pass for complete.
func TestTapSettlement(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, contentType string
		kind              Kind
		body              string
		want              outcome
	}{
		{"AnthropicCacheWriteReadAndThinking", appJSON, AnthropicMessages, `{"usage":{"input_tokens":3,"cache_creation_input_tokens":5,"cache_read_input_tokens":7,"output_tokens":11,"output_tokens_details":{"thinking_tokens":4}}}`, outcome{Usage{InputTokens: 3, CacheWriteTokens: 5, CacheReadTokens: 7, OutputTokens: 11, ReasoningTokens: 4}, true, true, ""}},
		{"AnthropicOneHourCacheWrite", appJSON, AnthropicMessages, `{"usage":{"input_tokens":3,"cache_creation_input_tokens":50,"cache_creation":{"ephemeral_5m_input_tokens":20,"ephemeral_1h_input_tokens":30},"output_tokens":11}}`, outcome{Usage{InputTokens: 3, CacheWriteTokens: 50, CacheWrite1hTokens: 30, OutputTokens: 11}, true, true, ""}},
		{"OpenAICachedAndReasoning", appJSON, OpenAIChat, `{"usage":{"prompt_tokens":100,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":32}}}`, outcome{Usage{InputTokens: 36, CacheReadTokens: 64, OutputTokens: 40, ReasoningTokens: 32}, true, true, ""}},
		{"ResponsesCachedAndReasoning", appJSON, OpenAIResponses, `{"usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":64},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":32}}}`, outcome{Usage{InputTokens: 36, CacheReadTokens: 64, OutputTokens: 40, ReasoningTokens: 32}, true, true, ""}},
		{"MoreCachedThanInput", appJSON, OpenAIChat, `{"usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":64}}}`, outcome{Usage{CacheReadTokens: 64, OutputTokens: 1}, true, true, ""}},
		{"BothNamings", appJSON, OpenAIChat, `{"usage":{"prompt_tokens":10,"input_tokens":10,"completion_tokens":2,"output_tokens":2}}`, outcome{Usage{InputTokens: 10, OutputTokens: 2}, true, true, ""}},
		{"AnthropicLaterCountsWin", eventStream, AnthropicMessages, anthropicStart + "event: message_delta\ndata: {\"usage\":{\"input_tokens\":15,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":35,\"output_tokens\":40}}\n\n", outcome{Usage{InputTokens: 15, CacheReadTokens: 35, OutputTokens: 40}, true, true, ""}},
		// message_delta's output_tokens is the cumulative count: a final 0 is 0, not
		// message_start's placeholder 1 (the SDKs' accumulators do the same).
		{"AnthropicFinalZeroOutput", eventStream, AnthropicMessages, anthropicStart + "event: message_delta\ndata: {\"usage\":{\"output_tokens\":0}}\n\n", outcome{Usage{InputTokens: 10, CacheWriteTokens: 20, CacheReadTokens: 30}, true, true, ""}},
		{"AnthropicDeltaNullCountsKeepStart", eventStream, AnthropicMessages, anthropicStart + "event: message_delta\ndata: {\"usage\":{\"input_tokens\":null,\"output_tokens\":40}}\n\n", outcome{Usage{InputTokens: 10, CacheWriteTokens: 20, CacheReadTokens: 30, OutputTokens: 40}, true, true, ""}},
		// HOSTILE item 47: only the exact key the SDKs read is usage, in either order;
		// the same key twice is ambiguous and is no usage (the hold is kept).
		{"CaseVariantUsageAfter", appJSON, AnthropicMessages, `{"usage":{"input_tokens":3,"output_tokens":11},"Usage":{"input_tokens":3,"output_tokens":10000000}}`, outcome{Usage{InputTokens: 3, OutputTokens: 11}, true, true, ""}},
		{"CaseVariantUsageBefore", appJSON, OpenAIChat, `{"Usage":{"prompt_tokens":3,"completion_tokens":10000000},"usage":{"prompt_tokens":3,"completion_tokens":11}}`, outcome{Usage{InputTokens: 3, OutputTokens: 11}, true, true, ""}},
		{"CaseVariantUsageAlone", appJSON, OpenAIChat, `{"USAGE":{"prompt_tokens":3,"completion_tokens":11}}`, outcome{}},
		{"CaseVariantCount", appJSON, AnthropicMessages, `{"usage":{"input_tokens":3,"output_tokens":11,"Output_Tokens":10000000}}`, outcome{Usage{InputTokens: 3, OutputTokens: 11}, true, true, ""}},
		{"CaseVariantInStream", eventStream, OpenAIChat, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":11},\"Usage\":{\"prompt_tokens\":3,\"completion_tokens\":10000000}}\n\n", outcome{Usage{InputTokens: 3, OutputTokens: 11}, true, true, ""}},
		{"DuplicateUsage", appJSON, AnthropicMessages, `{"usage":{"input_tokens":3,"output_tokens":11},"usage":{"input_tokens":3,"output_tokens":10000000}}`, outcome{}},
		{"AnthropicDeltaWithoutStart", eventStream, AnthropicMessages, anthropicDelta, outcome{Usage{OutputTokens: 40}, true, false, ""}},
		{"ChatStreamWithoutIncludeUsage", eventStream, OpenAIChat, chatText + chatText + "data: [DONE]\n\n", outcome{}},
		{"ChatJSONUsageNull", appJSON, OpenAIChat, `{"choices":[],"usage":null}`, outcome{}},
		{"ChatJSONNoUsage", appJSON, OpenAIChat, `{"choices":[]}`, outcome{}},
		{"ResponsesCompletedUsageNull", eventStream, OpenAIResponses, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":null}}\n\n", outcome{}},
		{"ResponsesIncomplete", eventStream, OpenAIResponses, "event: response.incomplete\ndata: {\"response\":{\"status\":\"incomplete\",\"usage\":{\"input_tokens\":4,\"output_tokens\":2}}}\n\n", outcome{Usage{InputTokens: 4, OutputTokens: 2}, true, true, ""}},
		{"ResponsesFailed", eventStream, OpenAIResponses, "event: response.failed\ndata: {\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"x\"},\"usage\":{\"input_tokens\":4,\"output_tokens\":0}}}\n\n", outcome{Usage{InputTokens: 4}, true, true, "server_error"}},
		{"AnthropicCutAfterStart", eventStream, AnthropicMessages, anthropicStart + anthropicText, anthropicPartial},
		{"AnthropicCutMidDelta", eventStream, AnthropicMessages, anthropicStart + anthropicDelta[:len(anthropicDelta)-10], anthropicPartial},
		{"ChatCutMidUsage", eventStream, OpenAIChat, chatText + chatUsage[:len(chatUsage)-5], outcome{}},
		{"JSONCut", appJSON, AnthropicMessages, `{"usage":{"input_tokens":3,"output_tokens":11}`, outcome{}},
		// Counts are data: a negative one is kept for the gateway to judge, not dropped.
		{"NegativeCount", appJSON, AnthropicMessages, `{"usage":{"input_tokens":-3,"output_tokens":11}}`, outcome{Usage{InputTokens: -3, OutputTokens: 11}, true, true, ""}},
		{"NegativeInOneNaming", appJSON, OpenAIResponses, `{"usage":{"prompt_tokens":0,"input_tokens":-3,"output_tokens":11}}`, outcome{Usage{InputTokens: -3, OutputTokens: 11}, true, true, ""}},
		{"FloatCount", appJSON, OpenAIChat, `{"usage":{"prompt_tokens":1.5,"completion_tokens":11}}`, outcome{}},
		{"UsageNotAnObject", appJSON, OpenAIChat, `{"usage":[1,2]}`, outcome{}},
		{"ErrorBody", appJSON, AnthropicMessages, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, outcome{}},
		{"UnknownKindPassesThrough", appJSON, Unknown, `{"usage":{"input_tokens":3}}`, outcome{}},
		{"EmbeddingsStreamIgnored", eventStream, OpenAIEmbeddings, chatUsage, outcome{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, res := run(t, c.kind, c.contentType, newChunkReader([]byte(c.body), 1, 5))
			if string(got) != c.body {
				t.Fatal("relayed bytes differ from the upstream's")
			}
			if res != c.want {
				t.Fatalf("got %+v, want %+v", res, c.want)
			}
		})
	}
}

// TestTapOversized checks the caps: memory stays bounded, and usage at the end of a
// payload over its cap is still found when it is in the kept tail.
func TestTapOversized(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("lorem ipsum ", 300_000) // 3.6 MB, over maxEventBytes
	responsesUsage := `{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":900000,"output_tokens_details":{"reasoning_tokens":0}}`
	completed := func(tail string) string {
		return "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"content\":[{\"text\":\"" + text + "\"}]}],\"usage\":" + responsesUsage + tail + "},\"sequence_number\":9}\n\n"
	}
	responsesFinal := outcome{Usage{InputTokens: 60, CacheReadTokens: 40, OutputTokens: 900000}, true, true, ""}
	anthropicBody := `{"content":[{"type":"text","text":"` + strings.Repeat("z", 9<<20) + `"}],"usage":{"input_tokens":5,"output_tokens":7}}`
	cases := []struct {
		name, contentType string
		kind              Kind
		body              string
		want              outcome
	}{
		{"ResponsesCompletedOverCap", eventStream, OpenAIResponses, completed(`,"user":null,"metadata":{"a":"b"}`), responsesFinal},
		{"ResponsesCompletedMultiLineOverCap", eventStream, OpenAIResponses, strings.Replace(completed(""), `,"usage":`, ",\ndata: \"usage\":", 1), responsesFinal},
		{"ResponsesUsageOutOfTail", eventStream, OpenAIResponses, completed(`,"metadata":{"a":"` + strings.Repeat("m", tailBytes) + `"}`), outcome{}},
		{"ResponsesEscapedUsageInText", eventStream, OpenAIResponses, "event: response.completed\ndata: {\"response\":{\"output\":\"" + text + `\"usage\":{\"input_tokens\":1}` + "\"}}\n\n", outcome{}},
		{"JSONBodyOverCap", appJSON, AnthropicMessages, anthropicBody, outcome{Usage{InputTokens: 5, OutputTokens: 7}, true, true, ""}},
		{"JSONBodyOverCapNestedUsageOnly", appJSON, AnthropicMessages, `{"content":[{"text":"` + strings.Repeat("z", 9<<20) + `"},{"input":{"usage":{"input_tokens":1}}}]}`, outcome{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, size := range []int{32 << 10, 1 << 20} {
				got, res := run(t, c.kind, c.contentType, newChunkReader([]byte(c.body), 7, size))
				if string(got) != c.body {
					t.Fatal("relayed bytes differ from the upstream's")
				}
				if res != c.want {
					t.Fatalf("pieces of %d: got %+v, want %+v", size, res, c.want)
				}
			}
		})
	}

	t.Run("BuffersStayWithinCaps", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			kind  Kind
			ct    string
			body  string
			cap   func(*Tap) int
			limit int
		}{
			{OpenAIChat, eventStream, "data: {\"choices\":[{\"delta\":{\"content\":\"" + text + "\"}}]}\n\n" + chatUsage, func(t *Tap) int { return cap(t.sse.data.buf) }, maxEventBytes},
			{OpenAIResponses, eventStream, completed(""), func(t *Tap) int { return cap(t.sse.data.buf) }, maxEventBytes},
			{AnthropicMessages, eventStream, anthropicStart + "event: content_block_delta\ndata: {\"text\":\"" + text + "\"}\n\n", func(t *Tap) int { return cap(t.sse.data.buf) }, 1024}, // content never copied
			{AnthropicMessages, appJSON, anthropicBody, func(t *Tap) int { return cap(t.json.buf) }, maxBodyBytes},
		} {
			tap := NewTap(c.kind, c.ct, io.NopCloser(newChunkReader([]byte(c.body), 1, 32<<10)))
			peak := 0
			buf := make([]byte, 32<<10)
			for {
				_, err := tap.Read(buf)
				peak = max(peak, c.cap(tap))
				if err != nil {
					break
				}
			}
			if peak > c.limit {
				t.Errorf("kind %d %s: buffer reached %d bytes, limit %d", c.kind, c.ct, peak, c.limit)
			}
		}
	})
}

// TestTapCloseMidStream: a client that hangs up closes the body before EOF; what was
// read still counts, and the last event is not taken for final unless it was whole.
func TestTapCloseMidStream(t *testing.T) {
	t.Parallel()
	stream := anthropicStart + anthropicText + anthropicDelta
	for cut, want := range map[int]outcome{
		len(anthropicStart) + 5:                       anthropicPartial,
		len(anthropicStart) + len(anthropicText) + 30: anthropicPartial,
		len(stream) - 3:                               anthropicPartial, // the last brace missing
		len(stream) - 2:                               anthropicFinal,   // whole but for the blank line
	} {
		tap := NewTap(AnthropicMessages, eventStream, io.NopCloser(strings.NewReader(stream)))
		if _, err := io.ReadFull(tap, make([]byte, cut)); err != nil {
			t.Fatal(err)
		}
		tap.Close()
		if got := reported(tap); got != want {
			t.Errorf("cut at %d of %d: got %+v, want %+v", cut, len(stream), got, want)
		}
	}
}

// TestTapAllocsDoNotGrow: after its buffers have grown to the biggest event, a Tap
// allocates only to decode the few usage events, however long the stream.
func TestTapAllocsDoNotGrow(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are random under the race detector")
	}
	short := anthropicStream(20)
	long := anthropicStream(2000)
	allocs := func(stream []byte) float64 {
		return testing.AllocsPerRun(20, func() {
			tap := NewTap(AnthropicMessages, eventStream, io.NopCloser(&eventReader{stream: stream}))
			io.Copy(io.Discard, tap)
		})
	}
	if a, b := allocs(short), allocs(long); b > a {
		t.Errorf("allocations grow with the stream: %v for 20 events, %v for 2000", a, b)
	}
}

func TestTapConcurrentResult(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	tap := NewTap(AnthropicMessages, eventStream, pr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, tap)
	}()
	for range 50 {
		fmt.Fprint(pw, anthropicStart)
		tap.Result()
	}
	fmt.Fprint(pw, anthropicDelta)
	pw.Close()
	<-done
	if got := reported(tap); got != anthropicFinal {
		t.Fatalf("got %+v", got)
	}
}
