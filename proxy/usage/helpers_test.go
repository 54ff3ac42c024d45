package usage

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// chunkReader hands out data 1..most bytes at a time, sometimes with io.EOF on the
// last chunk, as a network body may.
type chunkReader struct {
	data []byte
	rng  *rand.Rand
	most int
}

func newChunkReader(data []byte, seed uint64, most int) *chunkReader {
	return &chunkReader{data: data, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), most: most}
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data[:min(1+r.rng.IntN(r.most), len(r.data))])
	r.data = r.data[n:]
	if len(r.data) == 0 && r.rng.IntN(2) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// outcome is everything a Tap reports.
type outcome struct {
	Usage     Usage
	Seen      bool
	Final     bool
	StreamErr string
}

// run passes r through a Tap as a proxy would and returns the bytes the client got.
func run(t testing.TB, kind Kind, contentType string, r io.Reader) ([]byte, outcome) {
	t.Helper()
	tap := NewTap(kind, contentType, io.NopCloser(r))
	var out bytes.Buffer
	if _, err := io.Copy(&out, tap); err != nil {
		t.Fatalf("copy: %v", err)
	}
	if err := tap.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return out.Bytes(), reported(tap)
}

func reported(tap *Tap) outcome {
	u, seen, final := tap.Result()
	return outcome{u, seen, final, tap.StreamError()}
}

func golden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	eventStream = "text/event-stream; charset=utf-8"
	appJSON     = "application/json"
)
