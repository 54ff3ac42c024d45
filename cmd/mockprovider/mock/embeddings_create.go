package mock

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
)

// createEmbeddings answers POST /v1/embeddings like OpenAI, with a small vector per input
// derived from a hash of it, so equal inputs get equal vectors.
func createEmbeddings(x *exchange, req *request) reply {
	u := Usage{InputTokens: countInput(req)}
	inputs := embeddingInputs(req.Input)
	data := make([]obj, len(inputs))
	for i, in := range inputs {
		data[i] = obj{"object": "embedding", "index": i, "embedding": embed(in, req.EncodingFormat)}
	}
	return reply{body: obj{
		"object": "list", "data": data, "model": req.Model,
		"usage": x.usageField(obj{"prompt_tokens": u.InputTokens, "total_tokens": u.InputTokens}),
	}, usage: &u}
}

// embeddingInputs splits input into the items to embed: a string or a single token array
// is one item; an array of strings or of token arrays is one item per element.
func embeddingInputs(raw json.RawMessage) []json.RawMessage {
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) != nil || len(arr) == 0 || (arr[0][0] != '"' && arr[0][0] != '[') {
		return []json.RawMessage{raw}
	}
	return arr
}

// embed returns an 8-dimension vector, base64 of little-endian float32s when asked, as
// the Python SDK asks by default.
func embed(in json.RawMessage, format string) any {
	sum := sha256.Sum256(in)
	v := make([]float32, 8)
	for i := range v {
		v[i] = float32(sum[i])/127.5 - 1
	}
	if format != "base64" {
		return v
	}
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}
