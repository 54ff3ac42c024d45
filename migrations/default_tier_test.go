package migrations_test

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/migrations"
)

// TestDefaultTierLeavesOlderTeamsAlone: a team made before migration 15 (new
// teams start with a default tier and a team budget) keeps no default tier, no
// tier, no budget and no limits, and so do its members and pending invites.
func TestDefaultTierLeavesOlderTeamsAlone(t *testing.T) {
	t.Parallel()
	url := dbtest.Schema(t)
	pool := dbtest.Pool(t, url)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `DO $$ DECLARE s text := current_schema(); BEGIN
		EXECUTE format('DROP SCHEMA %I CASCADE', s); EXECUTE format('CREATE SCHEMA %I', s); END $$`); err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	old, err := goose.NewProvider(goose.DialectPostgres, sqlDB, os.DirFS("."), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.UpTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
		WITH team AS (INSERT INTO team (name) VALUES ('older') RETURNING id),
		member AS (INSERT INTO member (team_id, email, role) SELECT id, 'ada@older.test', 'member' FROM team)
		INSERT INTO invite (token_hash, team_id, email, expires_at)
		SELECT sha256('t'), id, 'bo@older.test', now() + interval '1 day' FROM team`); err != nil {
		t.Fatal(err)
	}

	if err := migrations.Apply(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var tiers, limited, inTier, invitedToTier int
	err = pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM tier),
		(SELECT count(*) FROM team WHERE default_tier_id IS NOT NULL OR budget_micros IS NOT NULL OR rate_limit IS NOT NULL
			OR concurrency IS NOT NULL OR tokens_per_minute IS NOT NULL),
		(SELECT count(*) FROM member WHERE tier_id IS NOT NULL),
		(SELECT count(*) FROM invite WHERE tier_id IS NOT NULL)`).Scan(&tiers, &limited, &inTier, &invitedToTier)
	if err != nil {
		t.Fatal(err)
	}
	if tiers+limited+inTier+invitedToTier != 0 {
		t.Errorf("after the migration: %d tiers, %d teams with a default tier or a limit, %d members in a tier, %d invites to a tier; want none",
			tiers, limited, inTier, invitedToTier)
	}
}
