package console_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// event is one Server-Sent Event.
type event struct{ name, data string }

// stream is an open event stream, read as a browser's EventSource reads it.
type stream struct {
	t      *testing.T
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// openStream GETs path as an EventSource does. The stream is closed at the
// end of the test, or by close.
func (c *client) openStream(path string) *stream {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", c.e.srv.URL+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	s := &stream{t: c.t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	c.t.Cleanup(s.close)
	return s
}

func (s *stream) close() { s.cancel(); s.resp.Body.Close() }

// next reads the next event that has a name, failing the test after timeout.
func (s *stream) next(timeout time.Duration) (event, error) {
	s.t.Helper()
	type result struct {
		ev  event
		err error
	}
	done := make(chan result, 1)
	go func() {
		var ev event
		var data []string
		for {
			line, err := s.r.ReadString('\n')
			if err != nil {
				done <- result{err: err}
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				if ev.name != "" {
					ev.data = strings.Join(data, "\n")
					done <- result{ev: ev}
					return
				}
				data = nil
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	select {
	case r := <-done:
		return r.ev, r.err
	case <-time.After(timeout):
		s.close()
		<-done
		return event{}, errors.New("no event within " + timeout.String())
	}
}

// firstEvent opens path's stream, reads its first event and leaves.
func (c *client) firstEvent(path string) event {
	c.t.Helper()
	s := c.openStream(path)
	defer s.close()
	if s.resp.StatusCode != http.StatusOK {
		return event{}
	}
	ev, err := s.next(5 * time.Second)
	if err != nil {
		c.t.Errorf("%s: %v", path, err)
	}
	return ev
}
