// Package leasetest helps tests of code that runs under leases: tables registered
// straight in Postgres, a connection that can be cut to partition one node from Postgres,
// and waiting on conditions instead of sleeping.
package leasetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/minkhq/mink/pkg/lease"
)

// Table registers a table with its lease rows, as table creation will, and returns its id.
func Table(tb testing.TB, db lease.DB, name string, partitions int32) int64 {
	tb.Helper()
	ctx := context.Background()
	var id int64
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO mink_tables (namespace, name, topic, partitions)
			VALUES ('default', $1, $1, 0) RETURNING id`, name).Scan(&id); err != nil {
			return err
		}
		return lease.AddScopes(ctx, tx, id, partitions)
	})
	if err != nil {
		tb.Fatalf("register table %s: %v", name, err)
	}
	return id
}

// Eventually polls cond every 20ms until it holds, failing the test after timeout.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ErrCut is what a cut connection answers.
var ErrCut = errors.New("leasetest: connection to Postgres cut")

// CuttableDB passes statements to a real database until Cut(true); then every statement
// fails at once, as if the node were partitioned from Postgres (or crashed, seen from
// Postgres).
type CuttableDB struct {
	DB  lease.DB
	cut atomic.Bool
}

// Cut cuts (true) or restores (false) the connection.
func (c *CuttableDB) Cut(on bool) { c.cut.Store(on) }

func (c *CuttableDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.cut.Load() {
		return pgconn.CommandTag{}, ErrCut
	}
	return c.DB.Exec(ctx, sql, args...)
}

func (c *CuttableDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if c.cut.Load() {
		return nil, ErrCut
	}
	return c.DB.Query(ctx, sql, args...)
}

func (c *CuttableDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.cut.Load() {
		return errRow{}
	}
	return c.DB.QueryRow(ctx, sql, args...)
}

func (c *CuttableDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if c.cut.Load() {
		return errBatch{}
	}
	return c.DB.SendBatch(ctx, b)
}

func (c *CuttableDB) Begin(ctx context.Context) (pgx.Tx, error) {
	if c.cut.Load() {
		return nil, ErrCut
	}
	return c.DB.Begin(ctx)
}

type errRow struct{}

func (errRow) Scan(...any) error { return ErrCut }

type errBatch struct{}

func (errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, ErrCut }
func (errBatch) Query() (pgx.Rows, error)         { return nil, ErrCut }
func (errBatch) QueryRow() pgx.Row                { return errRow{} }
func (errBatch) Close() error                     { return nil }
func (errBatch) Tx() pgx.Tx                       { return nil }
