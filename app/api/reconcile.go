package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/tollgate/tollgate/app/ledger"
)

type reconcileOut struct {
	Body struct {
		OK         bool     `json:"ok" doc:"Every side compared and nothing differs."`
		Mismatches []string `json:"mismatches" doc:"Each budget whose Redis spend counter differs from the ledger."`
		NotChecked []string `json:"not_checked,omitempty" doc:"What could not be compared, and why."`
	}
}

func (a *API) registerReconcile(h huma.API) {
	huma.Register(h, operation("reconcile", http.MethodGet, "/reconcile", AccessRead, 200,
		"Compare the Redis spend counters of the team's budgets with the ledger (run it while the team is idle)"),
		func(ctx context.Context, _ *struct{}) (*reconcileOut, error) {
			out := &reconcileOut{}
			out.Body.Mismatches = []string{}
			if a.redis == nil {
				out.Body.NotChecked = []string{"Redis spend counters: REDIS_URL is not set"}
				return out, nil
			}
			team, err := a.st.FindTeam(ctx, strconv.FormatInt(teamOf(ctx), 10))
			if err != nil {
				return nil, a.fromStore(err, "team")
			}
			mismatches, err := ledger.CompareCounters(ctx, a.st, a.redis, team)
			if unread, ok := errors.AsType[ledger.RedisUnread](err); ok {
				out.Body.NotChecked = []string{"Redis spend counters: Redis did not answer: " + unread.Err.Error()}
				return out, nil
			}
			if err != nil {
				return nil, a.fromStore(err, "team")
			}
			out.Body.Mismatches = append(out.Body.Mismatches, mismatches...)
			out.Body.OK = len(mismatches) == 0
			return out, nil
		})
}
