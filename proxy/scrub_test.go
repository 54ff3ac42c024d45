package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// TestRedactingBody: the secret, in any case and split across reads of any
// size, is masked with as many bytes; everything else passes unchanged.
func TestRedactingBody(t *testing.T) {
	t.Parallel()
	secret := "sk-Secret-1234"
	in := `{"error":"bad key sk-Secret-1234, SK-SECRET-1234 or sk-secret-1234; not sk-Secret-123 alone"}` + "\n"
	want := `{"error":"bad key **************, ************** or **************; not sk-Secret-123 alone"}` + "\n"
	for _, r := range []func(io.Reader) io.Reader{
		func(r io.Reader) io.Reader { return r },
		iotest.OneByteReader,
		iotest.HalfReader,
		iotest.DataErrReader,
	} {
		body := newRedactingBody(io.NopCloser(r(strings.NewReader(in))), secret)
		got, err := io.ReadAll(iotest.OneByteReader(body))
		if err != nil || string(got) != want {
			t.Fatalf("got %q, %v\nwant %q", got, err, want)
		}
	}
	var out bytes.Buffer
	if _, err := io.CopyBuffer(&out, newRedactingBody(io.NopCloser(iotest.OneByteReader(strings.NewReader(in))), secret), make([]byte, 8<<10)); err != nil || out.String() != want {
		t.Fatalf("with a large buffer: %q, %v", out.String(), err)
	}
}

func TestScrubHeader(t *testing.T) {
	t.Parallel()
	h := http.Header{
		"Set-Cookie":       {"tollgate=x"},
		"Set-Cookie2":      {"a=1"},
		"X-Echo":           {"ok", "key=SK-SECRET-1234;"},
		"X-Sk-Secret-1234": {"1"},
		"Content-Type":     {"application/json"},
	}
	scrubHeader(h, "sk-Secret-1234")
	if len(h) != 1 || h.Get("Content-Type") == "" {
		t.Fatalf("left %v", h)
	}
}
