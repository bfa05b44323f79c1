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

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/pg"
)

// Table registers a table with its lease rows, as table creation will, and returns its id.
func Table(tb testing.TB, db pg.DB, name string, partitions int32) int64 {
	tb.Helper()
	ctx := context.Background()
	var id int64
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO mink_tables (namespace, name, topic, partitions)
			VALUES ('default', $1, $1, $2) RETURNING id`, name, partitions).Scan(&id); err != nil {
			return err
		}
		return lease.AddScopes(ctx, tx, id, partitions)
	})
	if err != nil {
		tb.Fatalf("register table %s: %v", name, err)
	}
	return id
}

// Take gives holder the lease of scope s straight in Postgres, under a new epoch, as a
// lease round would, for tests of code that runs under a lease without a lease manager:
// holder is made a live member for an hour (its row is kept, and extended, if it is
// one already), since a lease is live only while its holder's member row is.
func Take(tb testing.TB, db pg.DB, s lease.Scope, holder string) lease.Lease {
	tb.Helper()
	ctx := context.Background()
	l := lease.Lease{Scope: s, Holder: holder}
	err := db.QueryRow(ctx, `WITH m AS (
			INSERT INTO mink_members (node_id, incarnation, roles, grpc_addr, started_at, renewed_at, expires_at)
			VALUES ($4, gen_random_uuid(), '{indexer,writer}', '', now(), now(), now() + interval '1 hour')
			ON CONFLICT (node_id) DO UPDATE SET expires_at = greatest(mink_members.expires_at, EXCLUDED.expires_at)
			RETURNING incarnation, expires_at)
		UPDATE mink_leases l SET holder = $4, incarnation = m.incarnation, epoch = l.epoch + 1, acquired_at = now()
		FROM m, mink_tables t
		WHERE l.kind = $1 AND l.table_id = $2 AND l.partition = $3 AND t.id = l.table_id
		RETURNING l.epoch, m.expires_at, t.namespace || '.' || t.name`,
		string(s.Kind), s.Table, s.Partition, holder).Scan(&l.Epoch, &l.Expires, &l.TableName)
	if err != nil {
		tb.Fatalf("take lease %s for %s: %v", s, holder, err)
	}
	return l
}

// Expire ends node's membership as a crash would once lease_ttl has passed: its member
// row expires now, so every lease it holds is dead and the next round frees it.
func Expire(tb testing.TB, db pg.DB, node string) {
	tb.Helper()
	if _, err := db.Exec(context.Background(), `UPDATE mink_members SET expires_at = now() WHERE node_id = $1`, node); err != nil {
		tb.Fatalf("expire member %s: %v", node, err)
	}
}

// Eventually waits until cond holds (await.True), failing the test after timeout. wake
// are the Changed methods of the managers whose rounds make cond hold (every node's whose
// leases it counts): a wait wakes on their events rather than only on its polls.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool, wake ...func() <-chan struct{}) {
	tb.Helper()
	await.True(tb, timeout, what, cond, wake...)
}

// ErrCut is what a cut connection answers.
var ErrCut = errors.New("leasetest: connection to Postgres cut")

// CuttableDB passes statements to a real database until Cut(true); then every statement
// fails at once, as if the node were partitioned from Postgres (or crashed, seen from
// Postgres).
type CuttableDB struct {
	DB  pg.DB
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
