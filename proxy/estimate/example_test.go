package estimate_test

import (
	"fmt"

	"github.com/tollgate/tollgate/proxy/estimate"
)

func Example() {
	price := estimate.Price{Model: "gpt-4o-mini", InputPerMTok: 150_000, OutputPerMTok: 600_000,
		CacheWritePerMTok: 150_000, CacheReadPerMTok: 75_000, MaxOutputTokens: 16_384}
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}]}`)

	req, err := estimate.Parse(estimate.OpenAIChat, body)
	if err != nil {
		fmt.Println(estimate.HTTPStatus(err), err)
		return
	}
	hold, _ := price.HoldFor(req) // no max_completion_tokens: held at the model's 16384
	cost := price.Cost(estimate.Usage{InputTokens: 9, OutputTokens: 10})
	fmt.Printf("%s: estimate %d input tokens, hold %d micros, cost %d micros\n", req.Model, req.InputTokens, hold, cost)

	_, err = estimate.Parse(estimate.OpenAIChat, []byte(`{"model":"gpt-4o-mini","max_tokens":"abc"}`))
	fmt.Println(estimate.HTTPStatus(err), err)
	// Output:
	// gpt-4o-mini: estimate 24 input tokens, hold 9834 micros, cost 8 micros
	// 400 max_tokens must be a positive integer no larger than 2147483648, got "abc"
}
