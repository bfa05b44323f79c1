// Package pgschema owns Mink's Postgres schema: plain SQL migrations embedded in the binary
// and applied at start under an advisory lock, so any number of nodes can start at once.
package pgschema

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

// lockKey is the advisory lock that serialises migrations across nodes ("mink" in ASCII).
const lockKey = 0x6d696e6b

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("pgschema: migration %q is not named NNNN_name.sql", e.Name())
		}
		b, err := migrations.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := range out {
		if out[i].Version != i+1 {
			return nil, fmt.Errorf("pgschema: migration %s out of sequence (want version %d)", out[i].Name, i+1)
		}
	}
	return out, nil
}

// Migrate applies every migration not yet applied, each in its own transaction, holding a
// session advisory lock so concurrent starts apply each one once.
func Migrate(ctx context.Context, db *pgxpool.Pool) error {
	all, err := All()
	if err != nil {
		return err
	}
	conn, err := db.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgschema: connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return fmt.Errorf("pgschema: advisory lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockKey)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS mink_schema_migrations (
		version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("pgschema: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM mink_schema_migrations").Scan(&current); err != nil {
		return fmt.Errorf("pgschema: %w", err)
	}
	if current > len(all) {
		return fmt.Errorf("pgschema: database is at schema version %d, newer than this binary's %d", current, len(all))
	}
	for _, m := range all[current:] {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("pgschema: %w", err)
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			tx.Rollback(ctx)
			return fmt.Errorf("pgschema: apply %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO mink_schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			tx.Rollback(ctx)
			return fmt.Errorf("pgschema: record %s: %w", m.Name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("pgschema: commit %s: %w", m.Name, err)
		}
	}
	return nil
}

// Created is when the schema was first applied: when the cluster was made (S3's creation
// date of its bucket).
func Created(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (time.Time, error) {
	var t time.Time
	err := db.QueryRow(ctx, `SELECT applied_at FROM mink_schema_migrations WHERE version = 1`).Scan(&t)
	return t, err
}
