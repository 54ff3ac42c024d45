// Package dbtest gives each test its own migrated Postgres schema, so tests that
// commit (HTTP end to end, LISTEN/NOTIFY) run in parallel and twice in a row.
// Test-only: never imported by non-test code.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/migrations"
)

// DefaultURL is the database tests use unless TEST_DATABASE_URL says otherwise.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/tollgate_test?sslmode=disable"

var createOnce sync.Once

// Schema creates a fresh schema, applies the migrations to it and returns a
// connection string whose search_path points at it. The schema is dropped when
// the test ends.
func Schema(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		base = DefaultURL
	}
	createOnce.Do(func() {
		if err := migrations.EnsureDatabase(ctx, base); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	})

	schema := "t_" + randomHex(8)
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("dbtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Errorf("dbtest: connect for cleanup: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dbtest: drop schema: %v", err)
		}
	})

	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	connString := u.String()

	pool := Pool(t, connString)
	if err := migrations.Apply(ctx, pool); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return connString
}

// Pool opens a pool on connString that is closed when the test ends.
func Pool(t testing.TB, connString string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), connString)
	if err != nil {
		t.Fatalf("dbtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
