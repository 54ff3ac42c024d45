package app_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/app/store"
)

// The official SDKs, pointed at the gateway with nothing changed but base URL and
// key, behave as against the provider.

func anthropicClient(f *fixture, key string) anthropic.Client {
	return anthropic.NewClient(anthropicoption.WithBaseURL(f.gw.URL+"/anthropic"), anthropicoption.WithAPIKey(key), anthropicoption.WithMaxRetries(0))
}

func openaiClient(f *fixture, key string) openai.Client {
	return openai.NewClient(openaioption.WithBaseURL(f.gw.URL+"/openai/v1"), openaioption.WithAPIKey(key), openaioption.WithMaxRetries(0))
}

var anthropicParams = anthropic.MessageNewParams{
	Model:     anthropic.Model("claude-sonnet-4-5"),
	MaxTokens: 24,
	Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello to the gateway"))},
}

func TestAnthropicSDK(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	client := anthropicClient(f, f.key)
	ctx := context.Background()

	msg, err := client.Messages.New(ctx, anthropicParams)
	must(t, err)
	if msg.Usage.OutputTokens != 24 || msg.Usage.InputTokens == 0 || len(msg.Content) == 0 {
		t.Fatalf("message usage = %+v, content blocks %d", msg.Usage, len(msg.Content))
	}

	stream := client.Messages.NewStreaming(ctx, anthropicParams)
	var acc anthropic.Message
	for stream.Next() {
		must(t, acc.Accumulate(stream.Current()))
	}
	must(t, stream.Err())
	if acc.Usage.OutputTokens != 24 || acc.StopReason == "" || len(strings.Fields(acc.Content[0].Text)) != 24 {
		t.Fatalf("streamed message: usage %+v stop %q text %q", acc.Usage, acc.StopReason, acc.Content[0].Text)
	}

	records := f.mock.Records()
	if len(records) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(records))
	}
	for _, r := range records {
		if r.APIKeyHeader != anthropicSecret {
			t.Errorf("upstream got x-api-key %q, want the injected provider credential", r.APIKeyHeader)
		}
		assertNoMemberKey(t, f, r.Headers)
	}

	badClient := anthropicClient(f, "tg_notakey")
	_, err = badClient.Messages.New(ctx, anthropicParams)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || !strings.Contains(apiErr.Error(), "authentication_error") {
		t.Fatalf("bad key: err = %v, want an *anthropic.Error 401 authentication_error", err)
	}
}

// TestAnthropicSDKCountTokens: messages.countTokens reaches the provider with
// the injected credential and is free, as at the provider: no hold against the
// budget, no charge, no ledger row.
func TestAnthropicSDKCountTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	setLimits(t, f, store.Limits{Budget: dollarsPtr(1_000_000), BudgetPeriod: "total"})
	waitForBudget(t, f.gw, f)
	client := anthropicClient(f, f.key)
	var resp *http.Response
	count, err := client.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    anthropicParams.Model,
		Messages: anthropicParams.Messages,
	}, anthropicoption.WithResponseInto(&resp))
	must(t, err)
	if count.InputTokens <= 0 {
		t.Fatalf("count_tokens = %+v, want the input tokens", count)
	}
	if got := resp.Header.Get("X-Budget-Remaining-Micros"); got != "1000000" {
		t.Errorf("budget remaining after count_tokens = %q, want all of it (1000000)", got)
	}
	records := f.mock.Records()
	if len(records) != 1 || records[0].Path != "/v1/messages/count_tokens" || records[0].APIKeyHeader != anthropicSecret {
		t.Fatalf("upstream saw %+v, want one count_tokens call with the provider credential", records)
	}
	time.Sleep(300 * time.Millisecond) // past a ledger flush
	rows, err := f.st.Ledger(context.Background(), f.team.ID, nil, time.Time{}, 100)
	must(t, err)
	if len(rows) != 0 {
		t.Fatalf("ledger rows %+v after count_tokens, want none: counting is free", rows)
	}
}

func TestOpenAISDK(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	client := openaiClient(f, f.key)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:               "gpt-4o-mini",
		MaxCompletionTokens: openai.Int(12),
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello to the gateway")},
	}

	completion, err := client.Chat.Completions.New(ctx, params)
	must(t, err)
	if completion.Usage.CompletionTokens != 12 || completion.Choices[0].Message.Content == "" {
		t.Fatalf("completion usage = %+v", completion.Usage)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	must(t, stream.Err())
	if acc.Usage.CompletionTokens != 12 || len(strings.Fields(acc.Choices[0].Message.Content)) != 12 {
		t.Fatalf("streamed completion usage = %+v", acc.Usage)
	}

	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
	})
	must(t, err)
	if resp.Usage.OutputTokens == 0 || resp.OutputText() == "" {
		t.Fatalf("response usage = %+v", resp.Usage)
	}

	emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")},
	})
	must(t, err)
	if len(emb.Data) != 1 || emb.Usage.PromptTokens == 0 {
		t.Fatalf("embeddings usage = %+v", emb.Usage)
	}

	for _, r := range f.mock.Records() {
		if r.AuthHeader != "Bearer "+openaiSecret {
			t.Errorf("upstream got Authorization %q, want the injected provider credential", r.AuthHeader)
		}
		assertNoMemberKey(t, f, r.Headers)
	}

	badClient := openaiClient(f, f.key+"x")
	_, err = badClient.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
		t.Fatalf("bad key: err = %v, want an *openai.Error 401 invalid_api_key", err)
	}
}

// TestStreamsArriveComplete guards against streamed POSTs cut short by the
// reverse proxy (golang/go#40747 lost 7-13% of them on this machine).
func TestStreamsArriveComplete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	client := anthropicClient(f, f.key)
	for i := range 100 {
		stream := client.Messages.NewStreaming(context.Background(), anthropicParams)
		var acc anthropic.Message
		stops := 0
		for stream.Next() {
			ev := stream.Current()
			if ev.Type == "message_stop" {
				stops++
			}
			must(t, acc.Accumulate(ev))
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if stops != 1 || acc.Usage.OutputTokens != 24 || len(strings.Fields(acc.Content[0].Text)) != 24 {
			t.Fatalf("stream %d incomplete: stops=%d usage=%+v", i, stops, acc.Usage)
		}
	}
}

func assertNoMemberKey(t *testing.T, f *fixture, h http.Header) {
	t.Helper()
	for name, values := range h {
		for _, v := range values {
			if strings.Contains(v, f.key) || strings.Contains(v, "tg_") {
				t.Errorf("member key reached the upstream in header %s", name)
			}
		}
	}
}
