package estimate_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"

	"github.com/tollgate/tollgate/proxy/estimate"
)

func compress(t testing.TB, enc string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch enc {
	case "gzip":
		w, _ = gzip.NewWriterLevel(&buf, gzip.BestCompression)
	case "zlib":
		w, _ = zlib.NewWriterLevel(&buf, zlib.BestCompression)
	case "raw":
		w, _ = flate.NewWriter(&buf, flate.BestCompression)
	case "br":
		w = brotli.NewWriterLevel(&buf, brotli.BestCompression)
	default:
		t.Fatalf("no encoder %s", enc)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeInflates(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("hello ", 500) + `"}]}`)
	tests := []struct {
		header string
		data   []byte
	}{
		{"", body},
		{"identity", body},
		{"gzip", compress(t, "gzip", body)},
		{"GZip ", compress(t, "gzip", body)},
		{"x-gzip", compress(t, "gzip", body)},
		{"deflate", compress(t, "zlib", body)},
		{"deflate", compress(t, "raw", body)}, // what some clients send as deflate
		{"br", compress(t, "br", body)},
		{"deflate", looksLikeZlib(t, body)},
	}
	for _, tt := range tests {
		got, err := estimate.Decode(tt.header, tt.data, 1<<20)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("Decode(%q): %d bytes, %v; want the %d-byte body", tt.header, len(got), err, len(body))
		}
	}
}

// looksLikeZlib is a raw deflate stream of body whose first two bytes form a valid
// zlib header: a non-final stored block of one byte, its header padded with 0x78
// (0x78 0x01 is a zlib header: deflate, 32 KB window, no dictionary), then the rest.
func looksLikeZlib(t *testing.T, body []byte) []byte {
	t.Helper()
	stream := append([]byte{0x78, 0x01, 0x00, 0xfe, 0xff, body[0]}, compress(t, "raw", body[1:])...)
	if (uint16(stream[0])<<8|uint16(stream[1]))%31 != 0 {
		t.Fatal("not a zlib header")
	}
	return stream
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m"}`)
	gz := compress(t, "gzip", body)
	tests := []struct {
		name, header string
		data         []byte
		status       int
		want         string
	}{
		{"zstd", "zstd", []byte{0x28, 0xb5, 0x2f, 0xfd}, 415, "zstd is not supported"},
		{"stacked", "gzip, br", gz, 415, "stacks encodings"},
		{"stacked identity", "identity, gzip", gz, 415, "stacks encodings"},
		{"unknown", "compress", gz, 415, "compress is not supported"},
		{"not gzip", "gzip", body, 400, "gzip request body cannot be inflated"},
		{"truncated gzip", "gzip", gz[:len(gz)-6], 400, "gzip request body is truncated"},
		{"corrupt checksum", "gzip", append(append([]byte{}, gz[:len(gz)-8]...), 0, 0, 0, 0, 0, 0, 0, 0), 400, "cannot be inflated"},
		{"bytes after gzip", "gzip", append(append([]byte{}, gz...), "garbage"...), 400, "7 bytes after the end"},
		{"two gzip members", "gzip", append(append([]byte{}, gz...), gz...), 400, "bytes after the end"},
		{"bytes after zlib", "deflate", append(compress(t, "zlib", body), 'x'), 400, "1 bytes after the end"},
		{"not brotli", "br", []byte("{not brotli"), 400, "br request body cannot be inflated"},
		{"empty gzip", "gzip", nil, 400, "gzip request body"},
		{"identity too large", "", bytes.Repeat([]byte("x"), 101), 413, "larger than 100 bytes"},
	}
	for _, tt := range tests {
		_, err := estimate.Decode(tt.header, tt.data, 100)
		if estimate.HTTPStatus(err) != tt.status || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Decode = %v (status %d), want %d saying %q", tt.name, err, estimate.HTTPStatus(err), tt.status, tt.want)
		}
		if be, ok := errors.AsType[*estimate.BodyError](err); !ok || be.Message != err.Error() {
			t.Errorf("%s: Decode error %v is not a *estimate.BodyError", tt.name, err)
		}
	}
}

// HOSTILE 22: a 10 KB gzip bomb (testdata/bomb-10MiB.gz: 10 MiB of zeros, gzip -9),
// the same stream as raw deflate, and a 1.6 KB brotli bomb (testdata/bomb-1GiB.br:
// 1 GiB of zeros, quality 5) fail fast with memory flat. Not parallel: it measures
// the heap.
func TestDecodeBomb(t *testing.T) {
	const limit = 1 << 20
	gz := must(os.ReadFile("testdata/bomb-10MiB.gz"))(t)
	if len(gz) > 11<<10 || binary.LittleEndian.Uint32(gz[len(gz)-4:]) != 10<<20 {
		t.Fatalf("testdata/bomb-10MiB.gz is %d bytes, inflating to %d; want about 10 KB inflating to 10 MiB",
			len(gz), binary.LittleEndian.Uint32(gz[len(gz)-4:]))
	}
	bombs := []struct {
		header string
		data   []byte
	}{
		{"gzip", gz},
		{"deflate", gz[10 : len(gz)-8]}, // the gzip member's raw deflate stream
		{"br", must(os.ReadFile("testdata/bomb-1GiB.br"))(t)},
	}
	for _, b := range bombs {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := estimate.Decode(b.header, b.data, limit)
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, estimate.ErrTooLarge) || estimate.HTTPStatus(err) != 413 || err.Error() != "request body is larger than 1 MiB once inflated" {
			t.Errorf("%s bomb (%d bytes): err = %v, want 413 ErrTooLarge", b.header, len(b.data), err)
		}
		allowed := uint64(3 * limit)
		if b.header == "br" {
			allowed += 16 << 20 // the window the stream declares
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > allowed {
			t.Errorf("%s bomb: allocated %d bytes, want at most %d", b.header, alloc, allowed)
		} else {
			t.Logf("%s bomb of %d bytes: refused in %s, %d bytes allocated", b.header, len(b.data), elapsed, alloc)
		}
		if elapsed > 2*time.Second {
			t.Errorf("%s bomb took %s", b.header, elapsed)
		}
	}
}

// must returns v, failing the test when err is set: must(f())(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func FuzzDecode(f *testing.F) {
	body := []byte(`{"model":"m","max_tokens":5}`)
	for _, enc := range []string{"gzip", "zlib", "raw", "br"} {
		f.Add(enc, compress(f, enc, body))
	}
	f.Add("", body)
	f.Fuzz(func(t *testing.T, enc string, data []byte) {
		header := enc
		switch enc {
		case "zlib", "raw":
			header = "deflate"
		}
		out, err := estimate.Decode(header, data, 4096)
		if err != nil {
			if estimate.HTTPStatus(err) == 0 {
				t.Fatalf("Decode(%q): %v has no status", header, err)
			}
			return
		}
		if len(out) > 4096 {
			t.Fatalf("Decode(%q) returned %d bytes, past the 4096 limit", header, len(out))
		}
	})
}
