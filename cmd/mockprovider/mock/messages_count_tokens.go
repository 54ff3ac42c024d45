package mock

// countMessageTokens answers POST /v1/messages/count_tokens like the Anthropic
// API: the prompt's input tokens by the same rule a message would be billed
// with, and no usage, since counting is free.
func countMessageTokens(_ *exchange, req *request) reply {
	return reply{body: obj{"input_tokens": countInput(req)}}
}
