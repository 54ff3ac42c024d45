package faulty

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// SlowClient opens a raw TCP connection to addr ("host:port", or a URL such as
// Server.URL) and writes req one byte every interval, as a slowloris would. It returns
// how long after connecting the server closed the connection, or max if it had not by
// then, and whatever the server answered (often nothing).
func SlowClient(t testing.TB, addr string, req []byte, interval, max time.Duration) (closedAfter time.Duration, answer []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if err := conn.SetDeadline(start.Add(max)); err != nil {
		t.Fatal(err)
	}

	// The server closing shows up as the end of the read, while the writes may still
	// succeed into the socket buffer for a while.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		answer, _ = io.ReadAll(conn) // EOF, reset or the deadline: each ends the wait
		closedAfter = min(time.Since(start), max)
	}()

	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range req {
		if _, err := conn.Write(req[i : i+1]); err != nil {
			break
		}
		select {
		case <-closed:
			return closedAfter, answer
		case <-tick.C:
		}
	}
	<-closed
	return closedAfter, answer
}
