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

	// HTMX wins with the new key in the answer; a form post without HTMX wins
	// with a redirect to the page that shows it once.
	won := func(r response) bool { return r.status == http.StatusOK || r.status == http.StatusSeeOther }
	var winners int
	for _, r := range responses {
		if won(r) {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d rotations of %s succeeded, want 1: %d %.400s", winners, id, responses[0].status, responses[0].body)
	}
	var winner string
	for _, k := range e.keys() {
		if k.ID != id {
			winner = k.ID
		}
	}
	for i, r := range responses {
		if won(r) {
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
