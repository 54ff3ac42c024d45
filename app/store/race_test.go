package store_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/store"
)

// racers is how many goroutines race for one change.
const racers = 12

// race runs do(i) for i in [0, racers) at once on f's store and returns their
// errors. The pool's connections are opened first, so the calls overlap
// instead of the first finishing while the others still dial.
func (f *fixture) race(t *testing.T, do func(i int) error) []error {
	t.Helper()
	warm := f.races(func(int) error { _, err := f.st.Keys(t.Context(), f.team.ID); return err })
	for _, err := range warm {
		if err != nil {
			t.Fatal(err)
		}
	}
	return f.races(do)
}

func (f *fixture) races(do func(i int) error) []error {
	errs := make([]error, racers)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range racers {
		done.Go(func() {
			start.Wait()
			errs[i] = do(i)
		})
	}
	start.Done()
	done.Wait()
	return errs
}

// oneWinner fails unless exactly one error is nil and every other is a
// StateError containing want (computed from the winner's index).
func oneWinner(t *testing.T, what string, errs []error, want func(winner int) string) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("%s: calls %d and %d both succeeded, want exactly one", what, winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("%s: no call succeeded: %v", what, errs[0])
	}
	for i, err := range errs {
		if i == winner {
			continue
		}
		s, ok := errors.AsType[*store.StateError](err)
		if !ok || !strings.Contains(s.Message, want(winner)) {
			t.Errorf("%s: loser %d got %v, want a StateError saying %q", what, i, err, want(winner))
		}
	}
	return winner
}

func TestConcurrentRotateHasOneWinner(t *testing.T) {
	t.Parallel()
	f := setup(t)
	old := must(f.st.IssueKey(t.Context(), actor, f.team.ID, f.member.ID, "laptop"))(t)
	issued := make([]store.IssuedKey, racers)
	errs := f.race(t, func(i int) (err error) {
		issued[i], err = f.st.RotateKey(t.Context(), actor, f.team.ID, old.ID, time.Hour)
		return err
	})
	winner := oneWinner(t, "rotate", errs, func(w int) string { return "already rotated to " + issued[w].ID })

	keys := must(f.st.Keys(t.Context(), f.team.ID))(t)
	if len(keys) != 2 {
		t.Fatalf("after the race %d keys exist, want the old one and one replacement: %+v", len(keys), keys)
	}
	if got := f.key(t, old.ID).ReplacedBy; got == nil || *got != issued[winner].ID {
		t.Errorf("old key replaced_by = %v, want the winner %s", got, issued[winner].ID)
	}
}

func TestConcurrentRevokeHasOneWinner(t *testing.T) {
	t.Parallel()
	f := setup(t)
	k := must(f.st.IssueKey(t.Context(), actor, f.team.ID, f.member.ID, "laptop"))(t)
	errs := f.race(t, func(int) error {
		_, err := f.st.RevokeKey(t.Context(), actor, f.team.ID, k.ID)
		return err
	})
	oneWinner(t, "revoke", errs, func(int) string { return "key " + k.ID + " is already revoked" })
}

// Two invites to one member the CLI added (no password yet), accepted at once:
// one sets the password, the other is told it is already set.
func TestConcurrentInvitesToOneMemberHaveOneWinner(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tokens := make([]string, racers)
	for i := range tokens {
		tokens[i], _ = must2(f.st.CreateInvite(t.Context(), actor, f.team.ID, f.member.Email, store.RoleMember))(t)
	}
	passwords := make([]string, racers)
	errs := f.race(t, func(i int) error {
		passwords[i] = "password number " + strconv.Itoa(i)
		_, err := f.st.AcceptInvite(t.Context(), tokens[i], passwords[i])
		return err
	})
	winner := oneWinner(t, "accept invite", errs, func(int) string { return "already set a password" })
	if _, err := f.st.SignIn(t.Context(), f.member.Email, passwords[winner]); err != nil {
		t.Errorf("the winner's password does not sign in: %v", err)
	}
}
