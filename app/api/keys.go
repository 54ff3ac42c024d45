package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

// KeyPath names a key in a path.
type KeyPath struct {
	ID string `path:"id" doc:"The key's id (the part after tg_)."`
}

type keyOut struct{ Body store.Key }

type issuedKeyOut struct{ Body store.IssuedKey }

type keysOut struct {
	Body struct {
		Keys []store.Key `json:"keys"`
	}
}

func (a *API) registerKeys(h huma.API) {
	huma.Register(h, operation("listKeys", http.MethodGet, "/keys", AccessRead, 200, "List the team's keys (never their secrets)"),
		func(ctx context.Context, in *struct {
			MemberID int64 `query:"member_id" doc:"Only this member's keys."`
		}) (*keysOut, error) {
			keys, err := a.st.Keys(ctx, teamOf(ctx))
			if err != nil {
				return nil, a.fromStore(err, "key")
			}
			out := &keysOut{}
			out.Body.Keys = []store.Key{}
			for _, k := range keys {
				if in.MemberID == 0 || k.MemberID == in.MemberID {
					out.Body.Keys = append(out.Body.Keys, k)
				}
			}
			return out, nil
		})
	huma.Register(h, secret(creating(operation("issueKey", http.MethodPost, "/members/{id}/keys", AccessOwner, 201,
		"Issue a key to a member; its plaintext is in this response only", 404))),
		func(ctx context.Context, in *struct {
			MemberPath
			IdempotencyKey string `header:"Idempotency-Key" required:"false" doc:"Replays the first response to a retry within 24h."`
			Body           struct {
				Name string `json:"name,omitempty" maxLength:"100" doc:"A label for the key."`
			}
		}) (*issuedKeyOut, error) {
			k, err := a.st.IssueKey(ctx, actorOf(ctx), teamOf(ctx), in.ID, in.Body.Name)
			if err != nil {
				return nil, a.fromStore(err, "member")
			}
			return &issuedKeyOut{Body: k}, nil
		})
	huma.Register(h, secret(creating(operation("rotateKey", http.MethodPost, "/keys/{id}/rotate", AccessOwner, 201,
		"Replace a key; the old one works until its grace ends. Of concurrent rotations of one key exactly one wins, the others get 409", 404))),
		func(ctx context.Context, in *struct {
			KeyPath
			IdempotencyKey string `header:"Idempotency-Key" required:"false" doc:"Replays the first response to a retry within 24h."`
			Grace          string `query:"grace" doc:"How long the old key keeps working, e.g. 24h or 0s; default the server's KEY_ROTATION_GRACE."`
		}) (*issuedKeyOut, error) {
			grace := a.grace
			if in.Grace != "" {
				var err error
				if grace, err = time.ParseDuration(in.Grace); err != nil {
					p := problem(http.StatusUnprocessableEntity, ProblemValidation, "grace must be a duration such as 24h or 0s")
					p.Errors = []ProblemDetail{{Location: "query.grace", Message: err.Error()}}
					return nil, p
				}
			}
			k, err := a.st.RotateKey(ctx, actorOf(ctx), teamOf(ctx), in.ID, grace)
			if err != nil {
				return nil, a.fromStoreAt(err, "key", func(field string) string {
					if field == "grace" {
						return "query.grace"
					}
					return "path.id" // the key's member cannot have keys
				})
			}
			return &issuedKeyOut{Body: k}, nil
		})
	huma.Register(h, operation("revokeKey", http.MethodPost, "/keys/{id}/revoke", AccessOwner, 200,
		"Revoke a key: it is refused at the next request on every replica", 404, 409),
		func(ctx context.Context, in *KeyPath) (*keyOut, error) {
			k, err := a.st.RevokeKey(ctx, actorOf(ctx), teamOf(ctx), in.ID)
			if err != nil {
				return nil, a.fromStore(err, "key")
			}
			return &keyOut{Body: k}, nil
		})
}
