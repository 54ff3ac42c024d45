package migrations_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/app/dbtest"
	"github.com/tollgate/tollgate/migrations"
)

// TestConcurrentApply: replicas starting together each apply the migrations; the
// advisory lock makes that safe, and applying again is a no-op.
func TestConcurrentApply(t *testing.T) {
	t.Parallel()
	url := dbtest.Schema(t) // already migrated once; drop and recreate its tables below
	pool := dbtest.Pool(t, url)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `DO $$ DECLARE s text := current_schema(); BEGIN
		EXECUTE format('DROP SCHEMA %I CASCADE', s); EXECUTE format('CREATE SCHEMA %I', s); END $$`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			p, err := pgxpool.New(ctx, url)
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			errs <- migrations.Apply(ctx, p)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent apply: %v", err)
		}
	}
	v, err := migrations.Version(ctx, pool)
	if err != nil || v < 1 {
		t.Fatalf("version = %d, %v", v, err)
	}
	if err := migrations.Apply(ctx, pool); err != nil {
		t.Fatalf("re-apply: %v", err)
	}
}
