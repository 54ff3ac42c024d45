package estimate

// BytesPerToken is the ratio EstimateInputTokens assumes: deliberately fewer bytes
// per token than real text has, so the estimate is high for the common cases and
// the member is rarely held too little.
//
// Measured 2026-11 on Anthropic Messages bodies (the text split into 4 KB messages,
// JSON-encoded; body bytes per token with OpenAI's o200k_base / cl100k_base and
// Anthropic's public tokenizer (@anthropic-ai/tokenizer 0.0.4, the pre-Claude-3
// vocabulary), and against the mock provider's rule, text bytes / 4):
//
//	content                  o200k  cl100k  claude   mock (body bytes / mock tokens)
//	English, GPL-3           4.87   4.87    4.86     4.13
//	English, Go spec         4.42   4.44    4.07     4.22
//	English, design docs     4.18   4.18    3.96     4.13
//	Go code (net/http)       4.15   4.10    3.54     4.30
//	Python code              5.09   5.13    4.76     4.15
//	JavaScript               3.99   4.12    3.73     4.20
//	JSON data                2.87   2.87    2.85     4.69
//	French (Candide)         3.77   3.35    3.08     4.12
//	Japanese (Rashomon)      3.50   2.68    2.75     4.07
//	Chinese (Sunzi)          3.09   2.33    2.38     4.05
//	Korean                   3.55   2.29    2.10     4.05
//	decimal numbers          2.50   2.50    2.51     4.04
//	emoji                    2.64   1.63    1.63     4.03
//	random base64            1.48   1.40    1.43     4.03
//
// At 3 bytes per token the estimate is 30-70% high for English, code and French,
// and always at least the mock's count: a body holds every text byte the mock
// counts, JSON escaping only adds bytes, and bytes/3 >= bytes/4. CJK text with the
// older vocabularies, dense data, emoji and base64 come in under (by up to 2.1x
// for base64); settlement charges the real usage and carries the difference as
// debt, so an under-estimate costs at most the one request in flight. Images and
// documents sent as base64 are over-estimated by far (billed by pixels or pages,
// not bytes). The tier margin in Hold covers the densest content measured.
const BytesPerToken = 3

// EstimateInputTokens is a tokenizer-free estimate of the input tokens of a request
// body (uncompressed): its length / BytesPerToken, rounded up, at least 1.
func EstimateInputTokens(body []byte) int64 {
	return max(1, (int64(len(body))+BytesPerToken-1)/BytesPerToken)
}
