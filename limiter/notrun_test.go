package limiter

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tollgate/tollgate/limiter/redistest"
)

type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// TestNotRun: only Redis's own refusals of a command it did not run count, as
// sent by the server, wrapped, or with KVRocks's "ERR " before them; no error,
// another reply error or a transport error with the same words do not.
func TestNotRun(t *testing.T) {
	t.Parallel()
	noScript := redistest.Client(t).EvalSha(t.Context(), "0000000000000000000000000000000000000000", nil).Err()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{noScript, true},
		{fmt.Errorf("admit: %w", replyError("MOVED 3999 127.0.0.1:6381")), true},
		{replyError("ERR LOADING Redis is loading the dataset in memory"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{nil, false},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{replyError("ERR HOLDEXISTS"), false},
		{errors.New("NOSCRIPT but not from Redis"), false},
	} {
		if got := notRun(c.err); got != c.want {
			t.Errorf("notRun(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestNotRunAllocsDoNotGrow: notRun runs on every admission, nearly always
// with no error, and must cost no allocation then. Not parallel, and counted
// without -race (make test runs it again on its own).
func TestNotRunAllocsDoNotGrow(t *testing.T) {
	if allocs := testing.AllocsPerRun(100, func() { notRun(nil) }); allocs != 0 {
		t.Errorf("notRun(nil) allocates %.0f times a call, want 0", allocs)
	}
}
