package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/pg"
)

// Fenced runs fn in a transaction that first checks, in Postgres, that l.Holder still holds
// epoch l.Epoch of the lease and that its member row (the incarnation that took the lease)
// is live, and locks the lease row FOR SHARE so no other node can take it until the
// transaction ends. Only the lease row is locked: the holder's member row, whose renewal
// renews the lease, is read, never locked, so however long fn takes it never delays a
// renewal. If the check fails it returns ErrLeaseLost and fn never runs: a stale holder
// changes nothing.
func Fenced(ctx context.Context, db pg.DB, l Lease, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM mink_leases l
			WHERE l.kind = $1 AND l.table_id = $2 AND l.partition = $3 AND l.holder = $4 AND l.epoch = $5
			  AND EXISTS (SELECT 1 FROM mink_members m
			    WHERE m.node_id = l.holder AND m.incarnation = l.incarnation AND m.expires_at > now())
			FOR SHARE OF l`, string(l.Kind), l.Table, l.Partition, l.Holder, l.Epoch).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s epoch %d is no longer held by %s", ErrLeaseLost, l.Scope, l.Epoch, l.Holder)
		}
		if err != nil {
			return err
		}
		return fn(tx)
	})
}

// HeldSQL is a condition, for the writes of other packages that check a lease in their
// own statement: true while node $holder holds epoch $epoch of the lease of kind $kind,
// table $table, partition $partition (the placeholders are the caller's, given in that
// order as the format's arguments), with its member row live.
func HeldSQL(kind, table, partition, holder, epoch string) string {
	return `EXISTS (SELECT 1 FROM mink_leases l JOIN mink_members m
		  ON m.node_id = l.holder AND m.incarnation = l.incarnation AND m.expires_at > now()
		WHERE l.kind = ` + kind + ` AND l.table_id = ` + table + ` AND l.partition = ` + partition +
		` AND l.holder = ` + holder + ` AND l.epoch = ` + epoch + `)`
}

// AddScopes makes the lease rows of a table with the given partition count: its writer
// lease and one partition lease per partition. Partitions only grow (as in Kafka); rows
// that exist are kept with their holders and epochs. Call it in the transaction that
// creates or updates the table so nothing is half-created.
func AddScopes(ctx context.Context, db pg.DB, table int64, partitions int32) error {
	_, err := db.Exec(ctx, `INSERT INTO mink_leases (kind, table_id, partition)
		SELECT 'writer', $1::bigint, -1
		UNION ALL
		SELECT 'partition', $1::bigint, p FROM generate_series(0, $2::int - 1) AS p
		ON CONFLICT DO NOTHING`, table, partitions)
	if err != nil {
		return fmt.Errorf("lease: add scopes of table %d: %w", table, err)
	}
	_, err = db.Exec(ctx, `UPDATE mink_tables SET partitions = greatest(partitions, $2) WHERE id = $1`, table, partitions)
	return err
}

const memberColumns = `node_id, roles, grpc_addr, addrs, version, draining, max_partitions, started_at, renewed_at, expires_at`

func scanMember(row pgx.Row) (Member, error) {
	var m Member
	var roles []string
	err := row.Scan(&m.NodeID, &roles, &m.GRPCAddr, &m.Addrs, &m.Version, &m.Draining, &m.MaxPartitions, &m.StartedAt, &m.RenewedAt, &m.ExpiresAt)
	for _, r := range roles {
		m.Roles = append(m.Roles, Role(r))
	}
	return m, err
}

// ListMembers returns the live members, by node id.
func ListMembers(ctx context.Context, db pg.DB) ([]Member, error) {
	rows, err := db.Query(ctx, `SELECT `+memberColumns+` FROM mink_members WHERE expires_at > now() ORDER BY node_id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) { return scanMember(r) })
}

// LookupMember returns the live member with that id, or ErrNoSuchMember.
func LookupMember(ctx context.Context, db pg.DB, node string) (Member, error) {
	m, err := scanMember(db.QueryRow(ctx, `SELECT `+memberColumns+` FROM mink_members WHERE node_id = $1 AND expires_at > now()`, node))
	if errors.Is(err, pgx.ErrNoRows) {
		return Member{}, fmt.Errorf("%w: %q", ErrNoSuchMember, node)
	}
	return m, err
}

// ListLeases returns every lease, or one table's (table > 0): free ones with an empty
// Holder. A lease whose holder is not live is shown free: that is what Postgres will
// let others do. Expires is the holder's member row's expiry.
func ListLeases(ctx context.Context, db pg.DB, table int64) ([]Info, error) {
	rows, err := db.Query(ctx, `SELECT l.kind, l.table_id, l.partition, t.namespace || '.' || t.name,
			l.holder, l.epoch, l.expires_at
		FROM mink_lease_holders l JOIN mink_tables t ON t.id = l.table_id
		WHERE $1::bigint = 0 OR l.table_id = $1::bigint
		ORDER BY l.table_id, l.kind DESC, l.partition`, table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Info, error) {
		var i Info
		var kind string
		var holder *string
		var exp *time.Time
		err := r.Scan(&kind, &i.Table, &i.Partition, &i.TableName, &holder, &i.Epoch, &exp)
		i.Kind = Kind(kind)
		if holder != nil {
			i.Holder = *holder
		}
		if exp != nil && holder != nil {
			i.Expires = *exp
		}
		return i, err
	})
}

// leaseArrays spreads leases into the parallel arrays that unnest() takes, with epochs.
func leaseArrays(ls map[Scope]Lease) (kinds []string, tables []int64, parts []int32, epochs []int64) {
	for s, l := range ls {
		kinds = append(kinds, string(s.Kind))
		tables = append(tables, s.Table)
		parts = append(parts, s.Partition)
		epochs = append(epochs, l.Epoch)
	}
	return kinds, tables, parts, epochs
}

// collectScopes reads rows of (kind, table_id, partition).
func collectScopes(rows pgx.Rows) ([]Scope, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Scope, error) {
		var s Scope
		var kind string
		err := r.Scan(&kind, &s.Table, &s.Partition)
		s.Kind = Kind(kind)
		return s, err
	})
}

// scopeArrays spreads scopes into the parallel arrays that unnest() takes.
func scopeArrays(ss []Scope) (kinds []string, tables []int64, parts []int32) {
	for _, s := range ss {
		kinds = append(kinds, string(s.Kind))
		tables = append(tables, s.Table)
		parts = append(parts, s.Partition)
	}
	return
}

// scanLeases reads rows of (kind, table_id, partition, table name, epoch); every lease
// expires when the holder's member row does, at expires.
func scanLeases(rows pgx.Rows, holder string, expires time.Time) ([]Lease, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		var kind string
		err := r.Scan(&kind, &l.Table, &l.Partition, &l.TableName, &l.Epoch)
		l.Kind, l.Holder, l.Expires = Kind(kind), holder, expires
		return l, err
	})
}
