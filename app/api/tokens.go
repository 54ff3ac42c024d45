package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/store"
)

type adminTokensOut struct {
	Body struct {
		Tokens []store.AdminToken `json:"tokens"`
	}
}

// registerTokens lists the team's admin tokens with whom each belongs to; they
// are made in the console (a person's) or by the operator's CLI (the
// deployment's), never here.
func (a *API) registerTokens(h huma.API) {
	huma.Register(h, operation("listAdminTokens", http.MethodGet, "/tokens", AccessRead, 200,
		"List the team's admin tokens (never their secrets) and whom each belongs to"),
		func(ctx context.Context, _ *struct{}) (*adminTokensOut, error) {
			team := teamOf(ctx)
			tokens, err := a.st.AdminTokens(ctx, &team)
			if err != nil {
				return nil, a.fromStore(err, "admin token")
			}
			out := &adminTokensOut{}
			out.Body.Tokens = append([]store.AdminToken{}, tokens...)
			return out, nil
		})
}
