package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/console"
	"github.com/tollgate/tollgate/app/store"
)

// MemberPath names a member in a path.
type MemberPath struct {
	ID int64 `path:"id" doc:"The member's id."`
}

type memberOut struct{ Body store.Member }

type membersOut struct {
	Body struct {
		Members []store.Member `json:"members"`
	}
}

type addMemberIn struct {
	IdempotencyKey string `header:"Idempotency-Key" required:"false" doc:"Replays the first response to a retry within 24h."`
	Body           struct {
		Email string `json:"email" format:"email" doc:"The member's email; they sign in once invited."`
		Role  string `json:"role,omitempty" enum:"member,owner" default:"member"`
	}
}

type addedMemberOut struct {
	Body struct {
		store.Member
		InviteLink      string    `json:"invite_link" doc:"The one-time link that lets them set a password, until its expiry; shown only this once."`
		InviteExpiresAt time.Time `json:"invite_expires_at"`
	}
}

type inviteOut struct {
	Body struct {
		Link      string    `json:"link" doc:"The one-time link that lets them set a password, until its expiry; shown only this once."`
		Email     string    `json:"email"`
		Role      string    `json:"role"`
		ExpiresAt time.Time `json:"expires_at"`
	}
}

func (a *API) registerMembers(h huma.API) {
	huma.Register(h, operation("listMembers", http.MethodGet, "/members", AccessRead, 200, "List the team's members"),
		func(ctx context.Context, _ *struct{}) (*membersOut, error) {
			members, err := a.st.Members(ctx, teamOf(ctx))
			if err != nil {
				return nil, a.fromStore(err, "member")
			}
			out := &membersOut{}
			out.Body.Members = members
			return out, nil
		})
	huma.Register(h, secret(creating(operation("addMember", http.MethodPost, "/members", AccessOwner, 201,
		"Add a member, invited: the response's one-time link lets them set a password"))),
		func(ctx context.Context, in *addMemberIn) (*addedMemberOut, error) {
			m, token, inv, err := a.st.AddMemberInvited(ctx, actorOf(ctx), teamOf(ctx), in.Body.Email, in.Body.Role)
			if err != nil {
				return nil, a.fromStore(err, "member "+in.Body.Email)
			}
			out := &addedMemberOut{}
			out.Body.Member, out.Body.InviteLink, out.Body.InviteExpiresAt = m, console.InviteURL(a.publicURL, token), inv.ExpiresAt
			return out, nil
		})
	huma.Register(h, secret(creating(operation("inviteMember", http.MethodPost, "/invites", AccessOwner, 201,
		"Make a one-time invite link for a new (or password-less) member"))),
		func(ctx context.Context, in *addMemberIn) (*inviteOut, error) {
			token, inv, err := a.st.CreateInvite(ctx, actorOf(ctx), teamOf(ctx), in.Body.Email, in.Body.Role)
			if err != nil {
				return nil, a.fromStore(err, "invite for "+in.Body.Email)
			}
			out := &inviteOut{}
			out.Body.Link, out.Body.Email, out.Body.Role, out.Body.ExpiresAt = console.InviteURL(a.publicURL, token), inv.Email, inv.Role, inv.ExpiresAt
			return out, nil
		})
	huma.Register(h, operation("removeMember", http.MethodDelete, "/members/{id}", AccessOwner, 200,
		"Remove a member for good: their keys are revoked, their sessions and admin tokens end on every replica at the next request; "+
			"their ledger and audit rows stay (not yourself, not the last active owner)", 404, 409),
		func(ctx context.Context, in *MemberPath) (*memberOut, error) {
			m, err := a.st.RemoveMember(ctx, actorOf(ctx), teamOf(ctx), in.ID)
			if err != nil {
				return nil, a.fromStore(err, "member")
			}
			return &memberOut{Body: m}, nil
		})
	huma.Register(h, operation("getMember", http.MethodGet, "/members/{id}", AccessRead, 200, "Get a member", 404),
		func(ctx context.Context, in *MemberPath) (*memberOut, error) {
			m, err := a.member(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return &memberOut{Body: m}, nil
		})
	for _, s := range []struct{ id, path, status, summary string }{
		{"cutOffMember", "/members/{id}/cut-off", store.StatusDisabled,
			"Cut a member off: their keys, admin tokens and console sessions are refused at the next request (not yourself, not the last active owner)"},
		{"restoreMember", "/members/{id}/restore", store.StatusActive,
			"Restore a member who was cut off (not yourself); they sign in to the console again"},
	} {
		huma.Register(h, operation(s.id, http.MethodPost, s.path, AccessOwner, 200, s.summary, 404, 409),
			func(ctx context.Context, in *MemberPath) (*memberOut, error) {
				m, err := a.st.SetMemberStatus(ctx, actorOf(ctx), teamOf(ctx), in.ID, s.status)
				if err != nil {
					return nil, a.fromStore(err, "member")
				}
				return &memberOut{Body: m}, nil
			})
	}
	huma.Register(h, operation("setMemberRole", http.MethodPut, "/members/{id}/role", AccessOwner, 200,
		"Make a member an owner, or an owner a member (not yourself, not the last active owner); a demoted owner's admin tokens stop", 404, 409, 422),
		func(ctx context.Context, in *struct {
			MemberPath
			Body struct {
				Role string `json:"role" enum:"member,owner"`
			}
		}) (*memberOut, error) {
			m, err := a.st.SetMemberRole(ctx, actorOf(ctx), teamOf(ctx), in.ID, in.Body.Role)
			if err != nil {
				return nil, a.fromStore(err, "member")
			}
			return &memberOut{Body: m}, nil
		})
	huma.Register(h, operation("getMemberLimits", http.MethodGet, "/members/{id}/limits", AccessRead, 200, "Get a member's limits and budget", 404),
		func(ctx context.Context, in *MemberPath) (*limitsOut, error) {
			if _, err := a.member(ctx, in.ID); err != nil {
				return nil, err
			}
			l, err := a.st.MemberLimits(ctx, teamOf(ctx), in.ID)
			if err != nil {
				return nil, a.fromStore(err, "member")
			}
			return &limitsOut{Body: limitsBody(l)}, nil
		})
	huma.Register(h, operation("setMemberLimits", http.MethodPut, "/members/{id}/limits", AccessOwner, 200,
		"Replace a member's limits and budget; every field is required (null: no limit of that kind)", 404, 422),
		func(ctx context.Context, in *struct {
			MemberPath
			limitsIn
		}) (*limitsOut, error) {
			l, err := in.Body.replace(fieldsOf(rawBody(ctx)))
			if err == nil {
				l, err = a.st.SetMemberLimits(ctx, actorOf(ctx), teamOf(ctx), in.ID, l)
			}
			return a.limitsAnswer(l, err, "member")
		})
	huma.Register(h, operation("patchMemberLimits", http.MethodPatch, "/members/{id}/limits", AccessOwner, 200,
		"Change some of a member's limits: fields left out stay, null removes a limit", 404, 422),
		func(ctx context.Context, in *struct {
			MemberPath
			limitsIn
		}) (*limitsOut, error) {
			change, err := in.Body.change(fieldsOf(rawBody(ctx)))
			var l store.Limits
			if err == nil {
				l, err = a.st.ChangeMemberLimits(ctx, actorOf(ctx), teamOf(ctx), in.ID, change)
			}
			return a.limitsAnswer(l, err, "member")
		})
}

// member is a member of the calling token's team, or a 404.
func (a *API) member(ctx context.Context, id int64) (store.Member, error) {
	m, err := a.st.FindMember(ctx, teamOf(ctx), strconv.FormatInt(id, 10))
	if err != nil {
		return store.Member{}, a.fromStore(err, "member")
	}
	return m, nil
}
