// Package pg is what Mink needs of Postgres besides its tables' SQL, which the stores
// hold: the database handle (DB), the database clock (Now), notifications (Listen) and
// Postgres's errors by SQLSTATE (Code).
package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is the database handle every store takes: *pgxpool.Pool, *pgx.Conn and pgx.Tx have
// it, so a store's function runs alone or inside a caller's transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Now is the database's clock: every time Mink compares is Postgres's, never a node's.
func Now(ctx context.Context, db DB) (time.Time, error) {
	var now time.Time
	err := db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
	return now, err
}

// Listen calls notify with the channel and payload each time a notification arrives on
// one of channels, and once with "", "" when it starts listening (what happened before is
// for the caller to read then), until ctx ends or the connection fails: its error. It
// holds one connection of db, which must lend one (a *pgxpool.Pool); the connection is
// closed at the end, not returned to the pool, since it listens.
func Listen(ctx context.Context, db DB, notify func(channel, payload string), channels ...string) error {
	p, ok := db.(interface {
		Acquire(context.Context) (*pgxpool.Conn, error)
	})
	if !ok {
		return fmt.Errorf("listen on %v: the database handle lends no connection to listen on", channels)
	}
	pc, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	notify("", "")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		notify(n.Channel, n.Payload)
	}
}

// SQLSTATEs Mink tells apart.
const (
	UniqueViolation = "23505"
	UndefinedTable  = "42P01"
)

// Code is the SQLSTATE of the Postgres error in err's chain, "" when Postgres did not
// answer err (a network error, a timeout, a Go error).
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
