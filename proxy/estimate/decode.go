package estimate

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/andybalholm/brotli"
)

// Decode inflates a request body by its Content-Encoding so the estimator can read
// it; the caller still forwards the original bytes upstream. It understands
// identity (or none), gzip (x-gzip), deflate (zlib-wrapped as HTTP says, or raw as
// some clients send) and br. Inflating stops at maxInflated bytes: past that it
// returns ErrTooLarge (413) having held at most maxInflated+1 bytes, so a
// compression bomb costs no more memory than an honest body (brotli's decoder adds
// the window the stream declares, at most 16 MiB). zstd, unknown and
// stacked encodings ("gzip, br") are ErrUnsupportedEncoding (415); a corrupt
// stream, or bytes after its end, is ErrInvalid (400).
func Decode(contentEncoding string, body []byte, maxInflated int64) ([]byte, error) {
	enc := strings.ToLower(strings.TrimSpace(contentEncoding))
	switch enc {
	case "", "identity":
		if int64(len(body)) > maxInflated {
			return nil, tooLarge(maxInflated)
		}
		return body, nil
	case "gzip", "x-gzip":
		return inflate("gzip", body, maxInflated, func(src io.Reader) (io.Reader, error) {
			zr, err := gzip.NewReader(src)
			if err == nil {
				// One member only: a parser that stops after the first must see what we see.
				zr.Multistream(false)
			}
			return zr, err
		})
	case "deflate":
		if zlibHeader(body) {
			out, err := inflate("deflate", body, maxInflated, func(src io.Reader) (io.Reader, error) { return zlib.NewReader(src) })
			// About 1 raw stream in 1000 starts like a zlib header: a stream that
			// does not inflate as zlib is read again as raw deflate.
			if _, bad := err.(*corruptError); !bad {
				return out, err
			}
		}
		return inflate("deflate", body, maxInflated, func(src io.Reader) (io.Reader, error) { return flate.NewReader(src), nil })
	case "br":
		return inflate("br", body, maxInflated, func(src io.Reader) (io.Reader, error) { return brotli.NewReader(src), nil })
	case "zstd":
		return nil, &BodyError{Err: ErrUnsupportedEncoding,
			Message: "Content-Encoding zstd is not supported here; send the body uncompressed or as gzip, deflate or br"}
	}
	msg := "Content-Encoding " + shown([]byte(enc)) + " is not supported; send the body uncompressed or as gzip, deflate or br"
	if strings.Contains(enc, ",") {
		msg = "Content-Encoding " + shown([]byte(enc)) + " stacks encodings; send the body uncompressed or with exactly one of gzip, deflate or br"
	}
	return nil, &BodyError{Err: ErrUnsupportedEncoding, Message: msg}
}

// inflate reads body through the decompressor open returns, keeping at most limit
// bytes. A stream that cannot be inflated is a *corruptError.
func inflate(enc string, body []byte, limit int64, open func(io.Reader) (io.Reader, error)) ([]byte, error) {
	src := bytes.NewReader(body)
	r, err := open(src)
	if err != nil {
		return nil, corrupt(enc, err)
	}
	out, err := readCapped(r, limit, 4*len(body))
	if errors.Is(err, ErrTooLarge) {
		return nil, err
	}
	if err != nil {
		return nil, corrupt(enc, err)
	}
	// compress/* read a bytes.Reader byte by byte (it is an io.ByteReader), so what
	// is left is exactly what follows the stream. brotli buffers, so it is unchecked.
	if enc != "br" && src.Len() > 0 {
		return nil, invalidBody("%s request body has %d bytes after the end of its compressed stream", enc, src.Len())
	}
	return out, nil
}

// readCapped reads r to its end into a buffer that starts at hint bytes, doubles
// as needed and never grows past limit+1 bytes: reading a bomb allocates less
// than about twice the limit in all, however far it would inflate.
func readCapped(r io.Reader, limit int64, hint int) ([]byte, error) {
	limit = min(max(limit, 0), math.MaxInt64-1)
	buf := make([]byte, 0, min(limit+1, int64(max(hint, 512))))
	for {
		if len(buf) == cap(buf) {
			next := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, tooLarge(limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// zlibHeader reports whether b starts like a zlib stream (RFC 1950): deflate
// method, a window no larger than 32 KB, and a header checksum.
func zlibHeader(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

func tooLarge(limit int64) error {
	return &BodyError{Err: ErrTooLarge, Message: "request body is larger than " + sizeString(limit) + " once inflated"}
}

// corruptError is a body that does not inflate; it is a 400 like any *BodyError.
type corruptError struct{ BodyError }

func (e *corruptError) Unwrap() error { return &e.BodyError }

func corrupt(enc string, err error) error {
	msg := enc + " request body cannot be inflated: " + err.Error()
	if errors.Is(err, io.ErrUnexpectedEOF) {
		msg = enc + " request body is truncated"
	}
	return &corruptError{BodyError{Err: ErrInvalid, Message: msg}}
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
