package store

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/app/db"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/proxy"
)

// Snapshot reads everything the data path needs in one consistent read, so a
// replica never sees a key without its member or a half-applied change.
func (s *Store) Snapshot(ctx context.Context, log *slog.Logger) (*proxy.Snapshot, error) {
	var snap *proxy.Snapshot
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			return err
		}
		keyRows, err := s.q.APIKeyListLive(ctx, tx)
		if err != nil {
			return err
		}
		memberRows, err := s.q.MemberListAll(ctx, tx)
		if err != nil {
			return err
		}
		routeRows, err := s.q.RouteListAll(ctx, tx)
		if err != nil {
			return err
		}
		targetRows, err := s.q.RouteTargetListAll(ctx, tx)
		if err != nil {
			return err
		}
		teamRows, err := s.q.TeamList(ctx, tx)
		if err != nil {
			return err
		}
		limitRows, err := s.q.MemberLimitListAll(ctx, tx)
		if err != nil {
			return err
		}
		tierRows, err := s.q.TierListAll(ctx, tx)
		if err != nil {
			return err
		}
		// Monthly periods are the longest that reset; a total grant never ages.
		grantRows, err := s.q.BudgetGrantListSince(ctx, tx, ptr(now.AddDate(0, -1, -1)))
		if err != nil {
			return err
		}
		// Limits were validated when set; one that no longer validates (a
		// hand-edited row) falls back to no limit of that kind, loudly.
		policy := func(what string, id int64, l Limits) limiter.Policy {
			p, err := l.Policy()
			if err != nil {
				log.Error("limits ignored: invalid", "of", what, "id", id, "err", err)
				return limiter.Policy{}
			}
			return p
		}
		teams := make([]proxy.Team, len(teamRows))
		for i, t := range teamRows {
			teams[i] = proxy.Team{ID: t.ID, Name: t.Name, Limits: policy("team", t.ID,
				teamLimitRow(t).limits())}
		}
		ownLimits := make(map[int64]Limits, len(limitRows))
		for _, l := range limitRows {
			ownLimits[l.MemberID] = memberLimitRow(l).limits()
		}
		tierLimits := make(map[int64]Limits, len(tierRows))
		tierWeights := make(map[int64]int64, len(tierRows))
		tierFits := make(map[int64]bool, len(tierRows))
		for _, t := range tierRows {
			tier := tierFrom(t)
			tierLimits[t.ID], tierWeights[t.ID], tierFits[t.ID] = tier.Limits, tier.Weight, tier.OverBudget == OverBudgetFit
		}
		teamFits := make(map[int64]bool, len(teamRows))
		for _, t := range teamRows {
			teamFits[t.ID] = t.OverBudget == string(OverBudgetFit)
		}
		// A tier's choice binds its members; the team's, the members in no tier.
		fits := func(m db.MemberListAllRow) bool {
			if m.TierID != nil {
				return tierFits[*m.TierID]
			}
			return teamFits[m.TeamID]
		}
		weight := func(m db.MemberListAllRow) int64 {
			if m.TierID != nil && tierWeights[*m.TierID] > 0 {
				return tierWeights[*m.TierID]
			}
			return 1
		}
		grants := grantSumsOf(grantRows)
		memberPolicy := func(m db.MemberListAllRow) limiter.Policy {
			return policy("member", m.ID, grants.binding(m.ID, m.TierID, tierLimits, ownLimits, now))
		}
		keys := make([]proxy.Key, 0, len(keyRows))
		for _, k := range keyRows {
			pk := proxy.Key{ID: k.ID, TeamID: k.TeamID, MemberID: k.MemberID, Revoked: k.RevokedAt != nil}
			copy(pk.SecretHash[:], k.SecretHash)
			if k.ExpiresAt != nil {
				pk.ExpiresAt = *k.ExpiresAt
			}
			keys = append(keys, pk)
		}
		members := make([]proxy.Member, len(memberRows))
		for i, m := range memberRows {
			members[i] = proxy.Member{ID: m.ID, TeamID: m.TeamID, Email: m.Email, Disabled: m.Status != StatusActive, Limits: memberPolicy(m),
				Weight: weight(m), FitHolds: fits(m)}
		}
		extraTargets := make(map[int64][]db.RouteTarget)
		for _, t := range targetRows {
			extraTargets[t.RouteID] = append(extraTargets[t.RouteID], t)
		}
		teamNames := make(map[int64]string, len(teamRows))
		for _, t := range teamRows {
			teamNames[t.ID] = t.Name
		}
		routes := make([]proxy.Route, 0, len(routeRows))
		for _, r := range routeRows {
			up, err := url.Parse(r.UpstreamUrl)
			if err != nil {
				// Saved routes were validated; one that no longer parses is skipped, not fatal.
				log.Error("route skipped: upstream URL does not parse", "route_id", r.ID, "prefix", r.Prefix)
				continue
			}
			targets := []proxy.Target{proxy.NewTarget(up, r.CredentialEnv)}
			granted := make([]RouteTarget, 0, len(extraTargets[r.ID]))
			for _, t := range extraTargets[r.ID] {
				granted = append(granted, RouteTarget{UpstreamURL: t.UpstreamUrl, CredentialEnv: t.CredentialEnv})
			}
			// A stored route that breaks the grants (saved before they were
			// narrowed, or written around the store) is kept in the snapshot,
			// disabled, so its callers are told why instead of meeting a 404.
			var disabled string
			if problem := grantProblem(s.grants, teamNames[r.TeamID], r.CredentialEnv, r.UpstreamUrl, granted); problem != nil {
				disabled = problem.Message
				log.Warn("route disabled: it breaks the deployment's credential grants", "route_id", r.ID, "prefix", r.Prefix,
					"team_id", r.TeamID, "reason", disabled)
			}
			for _, t := range extraTargets[r.ID] {
				tu, err := url.Parse(t.UpstreamUrl)
				if err != nil {
					log.Error("route target skipped: upstream URL does not parse", "route_id", r.ID, "target_id", t.ID)
					continue
				}
				targets = append(targets, proxy.NewTarget(tu, cmp.Or(t.CredentialEnv, r.CredentialEnv)))
			}
			routes = append(routes, proxy.Route{ID: r.ID, TeamID: r.TeamID, Prefix: r.Prefix, Targets: targets,
				Dialect: proxy.Dialect(r.Dialect), CredentialHeader: r.CredentialHeader,
				CredentialFormat: r.CredentialFormat, FailOpen: r.FailMode == "open",
				MaxAttempts: int(r.MaxAttempts), HealthPath: r.HealthPath, Disabled: disabled})
		}
		prices, err := s.priceTable(ctx, tx)
		if err != nil {
			return err
		}
		snap = proxy.NewSnapshot(teams, keys, members, routes, prices, now)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: load snapshot: %w", err)
	}
	return snap, nil
}
