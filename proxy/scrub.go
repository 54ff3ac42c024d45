package proxy

import (
	"io"
	"net/http"
	"strings"
)

// A route may point at any HTTP upstream, so what comes back is not trusted:
// scrubHeader and redactingBody keep its cookies and any echo of the injected
// credential from reaching the caller.

// injectedSecret is the provider key inside the credential a route injected
// ("" when it injects none): an upstream may echo the key alone, without the
// format around it ("Bearer {}").
func injectedSecret(route *Route, credential string) string {
	prefix, suffix, ok := strings.Cut(route.CredentialFormat, "{}")
	if !ok || len(credential) < len(prefix)+len(suffix) {
		return credential
	}
	return credential[len(prefix) : len(credential)-len(suffix)]
}

// scrubHeader deletes upstream cookies (they would be set on the gateway's own
// origin, beside the console's session cookie) and every field whose name or
// value contains secret in any ASCII case.
func scrubHeader(h http.Header, secret string) {
	for name, values := range h {
		if strings.EqualFold(name, "Set-Cookie") || strings.EqualFold(name, "Set-Cookie2") ||
			secret != "" && (indexFold(name, secret) >= 0 || anyContainsFold(values, secret)) {
			delete(h, name)
		}
	}
}

func anyContainsFold(values []string, secret string) bool {
	for _, v := range values {
		if indexFold(v, secret) >= 0 {
			return true
		}
	}
	return false
}

// redactingBody masks secret, in any ASCII case, in a response body as it
// passes, streamed or not: each occurrence becomes as many '*'. Masking rather
// than refusing keeps Content-Length and the JSON around the key valid, lets
// the caller still read the upstream's error message, and works on a stream
// whose headers are already sent; it needs no buffering of the whole body, so
// there is no bound past which bodies go unscanned. Only a tail that may begin
// the secret waits for the next read: an SSE event ends in a line break, which
// no credential contains, so no event is delayed.
type redactingBody struct {
	io.ReadCloser
	secret  string
	held    []byte // a tail read that may begin the secret
	ready   []byte // masked bytes the caller's buffer had no room for
	scratch []byte // read into when the caller's buffer is too small
	err     error
}

func newRedactingBody(body io.ReadCloser, secret string) *redactingBody {
	return &redactingBody{ReadCloser: body, secret: secret}
}

func (b *redactingBody) Read(p []byte) (int, error) {
	for {
		if len(b.ready) > 0 {
			n := copy(p, b.ready)
			b.ready = b.ready[n:]
			return n, nil
		}
		if b.err != nil {
			return 0, b.err
		}
		buf, small := p, len(p) < 2*len(b.secret)
		if small {
			// A reader with a small buffer (io.ReadAll near its capacity) still
			// gets whole matches masked.
			if b.scratch == nil {
				b.scratch = make([]byte, 4*len(b.secret))
			}
			buf = b.scratch
		}
		k := copy(buf, b.held)
		n, err := b.ReadCloser.Read(buf[k:])
		data := buf[:k+n]
		maskFold(data, b.secret)
		keep := 0
		if err == nil {
			keep = partialSuffixFold(data, b.secret)
		}
		b.held = append(b.held[:0], data[len(data)-keep:]...)
		out := data[:len(data)-keep]
		b.err = err
		if small {
			b.ready = out
			continue
		}
		if len(out) > 0 {
			return len(out), nil
		}
	}
}

// maskFold overwrites every occurrence of secret in data with '*'.
func maskFold(data []byte, secret string) {
	for i := 0; ; {
		j := indexFold(data[i:], secret)
		if j < 0 {
			return
		}
		i += j
		for end := i + len(secret); i < end; i++ {
			data[i] = '*'
		}
	}
}

// partialSuffixFold is the length of the longest tail of data, shorter than
// secret, that is a beginning of secret.
func partialSuffixFold(data []byte, secret string) int {
	for k := min(len(secret)-1, len(data)); k > 0; k-- {
		if hasPrefixFold(data[len(data)-k:], secret[:k]) {
			return k
		}
	}
	return 0
}

// indexFold is the first index of secret in s, ASCII letters matched in any
// case, or -1. Header values and bodies are both searched, without converting
// (and so copying) either.
func indexFold[S ~string | ~[]byte](s S, secret string) int {
	if len(secret) == 0 {
		return -1
	}
	first := lower(secret[0])
	for i := 0; i+len(secret) <= len(s); i++ {
		if lower(s[i]) == first && hasPrefixFold(s[i:], secret) {
			return i
		}
	}
	return -1
}

// hasPrefixFold reports whether s begins with prefix in any ASCII case; s must
// be at least as long.
func hasPrefixFold[S ~string | ~[]byte](s S, prefix string) bool {
	for i := 0; i < len(prefix); i++ {
		if lower(s[i]) != lower(prefix[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
