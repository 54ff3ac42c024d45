package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Concurrent rotations of one key from the console: one gets the new key, the
// others a 409 with the message naming the winner (the keys page re-rendered
// with it, or for HTMX the one line console.js shows).
func TestConcurrentRotateInConsoleHasOneWinner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, _ := e.owner("acme", "owner@acme.test")
	ada, _ := e.invite(owner, "ada@acme.test")
	_, id := keyOf(t, ada.htmx("/console/keys", url.Values{"name": {"laptop"}}))

	const racers = 6
	responses := make([]response, racers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range responses {
		done.Go(func() {
			start.Wait()
			path, form := "/console/keys/"+id+"/rotate", url.Values{"confirm": {"yes"}}
			if i%2 == 0 {
				responses[i] = ada.htmx(path, form)
			} else {
				responses[i] = ada.post(path, form)
			}
		})
	}
	start.Done()
	done.Wait()

	var winner string
	for _, r := range responses {
		if r.status == http.StatusOK {
			if winner != "" {
				t.Fatalf("two rotations of %s succeeded", id)
			}
			_, winner = keyOf(t, r)
		}
	}
	if winner == "" {
		t.Fatalf("no rotation of %s succeeded: %d %.400s", id, responses[0].status, responses[0].body)
	}
	for i, r := range responses {
		if r.status == http.StatusOK {
			continue
		}
		want := "key " + id + " was already rotated to " + winner
		msg := r.text("form-error")
		if i%2 == 0 {
			msg = r.body
		}
		if r.status != http.StatusConflict || !strings.Contains(msg, want) || r.has("new-key") {
			t.Errorf("losing rotation (htmx %v): %d, message %q, want 409 saying %q\n%.400s", i%2 == 0, r.status, msg, want, r.body)
		}
	}
	if n := len(e.keys()); n != 2 {
		t.Errorf("%d keys after the race, want the old one and one replacement", n)
	}
}
