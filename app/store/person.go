package store

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
)

// person is who stands behind actor: the member for a console session
// ("member:<id>") or for a token of theirs ("token:<id>:<name>"). ok is false
// for the deployment: the operator's CLI, or a token the CLI made. A token
// that belongs to no one, or an actor of no known shape, is refused, so a
// check that someone is not deciding their own case cannot be passed by
// coming in through an unrecognised door.
func (s *Store) person(ctx context.Context, tx pgx.Tx, actor Actor) (memberID int64, ok bool, err error) {
	a := string(actor)
	switch {
	case actor == ActorCLI:
		return 0, false, nil
	case strings.HasPrefix(a, "member:"):
		id, err := strconv.ParseInt(strings.TrimPrefix(a, "member:"), 10, 64)
		if err != nil {
			return 0, false, forbidden("unknown actor %q", a)
		}
		return id, true, nil
	case strings.HasPrefix(a, "token:"):
		id, _, _ := strings.Cut(strings.TrimPrefix(a, "token:"), ":")
		t, err := s.q.AdminTokenGet(ctx, tx, id)
		if err != nil {
			return 0, false, mapErr(err)
		}
		switch {
		case t.MemberID != nil:
			return *t.MemberID, true, nil
		case t.OwnerKind == OwnerDeployment:
			return 0, false, nil
		}
	}
	return 0, false, forbidden("no one is known to act as %q", a)
}

// lockOwners locks the team's active owners (see MemberLockActiveOwners) and
// refuses an actor who is a person but no longer among them: a change that
// raced their own cut-off or demotion does not land.
func (s *Store) lockOwners(ctx context.Context, tx pgx.Tx, actor Actor, teamID int64) (owners []int64, person int64, isPerson bool, err error) {
	if person, isPerson, err = s.person(ctx, tx, actor); err != nil {
		return nil, 0, false, err
	}
	if owners, err = s.q.MemberLockActiveOwners(ctx, tx, teamID); err != nil {
		return nil, 0, false, err
	}
	if isPerson && !slices.Contains(owners, person) {
		return nil, 0, false, forbidden("only an active owner of the team can do this")
	}
	return owners, person, isPerson, nil
}

// lastOwner reports whether m is the team's only active owner, given the
// locked list of them.
func lastOwner(m db.Member, owners []int64) bool {
	return m.Role == RoleOwner && m.Status == StatusActive && len(owners) == 1 && owners[0] == m.ID
}
