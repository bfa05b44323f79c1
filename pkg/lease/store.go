package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the lease library needs of Postgres; *pgxpool.Pool and *pgx.Conn have it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Fenced runs fn in a transaction that first checks, in Postgres, that l.Holder still holds
// epoch l.Epoch of the lease and that it has not expired, and locks the lease row FOR
// SHARE so no other node can take it until the transaction ends. If the check fails it
// returns ErrLeaseLost and fn never runs: a stale holder changes nothing.
func Fenced(ctx context.Context, db DB, l Lease, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM mink_leases
			WHERE kind = $1 AND table_id = $2 AND partition = $3
			  AND holder = $4 AND epoch = $5 AND expires_at > now()
			FOR SHARE`, string(l.Kind), l.Table, l.Partition, l.Holder, l.Epoch).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s epoch %d is no longer held by %s", ErrLeaseLost, l.Scope, l.Epoch, l.Holder)
		}
		if err != nil {
			return err
		}
		return fn(tx)
	})
}

// AddScopes makes the lease rows of a table with the given partition count: its writer
// lease and one partition lease per partition. Partitions only grow (as in Kafka); rows
// that exist are kept with their holders and epochs. Call it in the transaction that
// creates or updates the table so nothing is half-created.
func AddScopes(ctx context.Context, db DB, table int64, partitions int32) error {
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

const memberColumns = `node_id, roles, grpc_addr, addrs, version, draining, started_at, renewed_at, expires_at`

func scanMember(row pgx.Row) (Member, error) {
	var m Member
	var roles []string
	err := row.Scan(&m.NodeID, &roles, &m.GRPCAddr, &m.Addrs, &m.Version, &m.Draining, &m.StartedAt, &m.RenewedAt, &m.ExpiresAt)
	for _, r := range roles {
		m.Roles = append(m.Roles, Role(r))
	}
	return m, err
}

// ListMembers returns the live members, by node id.
func ListMembers(ctx context.Context, db DB) ([]Member, error) {
	rows, err := db.Query(ctx, `SELECT `+memberColumns+` FROM mink_members WHERE expires_at > now() ORDER BY node_id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) { return scanMember(r) })
}

// LookupMember returns the live member with that id, or ErrNoSuchMember.
func LookupMember(ctx context.Context, db DB, node string) (Member, error) {
	m, err := scanMember(db.QueryRow(ctx, `SELECT `+memberColumns+` FROM mink_members WHERE node_id = $1 AND expires_at > now()`, node))
	if errors.Is(err, pgx.ErrNoRows) {
		return Member{}, fmt.Errorf("%w: %q", ErrNoSuchMember, node)
	}
	return m, err
}

// ListLeases returns every lease, or one table's (table > 0): free ones with an empty
// Holder. An expired lease is shown free: that is what Postgres will let others do.
func ListLeases(ctx context.Context, db DB, table int64) ([]Info, error) {
	rows, err := db.Query(ctx, `SELECT l.kind, l.table_id, l.partition, t.namespace || '.' || t.name,
			CASE WHEN l.expires_at > now() THEN l.holder END, l.epoch,
			CASE WHEN l.expires_at > now() THEN l.expires_at END
		FROM mink_leases l JOIN mink_tables t ON t.id = l.table_id
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
		if exp != nil {
			i.Expires = *exp
		}
		return i, err
	})
}

// readView reads what Decide needs in one batch: live members, tables, unexpired leases.
// It also deletes member rows dead for longer than a lease_ttl, so the table stays small
// without a separate janitor.
func readView(ctx context.Context, db DB, self string, ttl time.Duration, counter func(int)) (View, map[int64]string, error) {
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM mink_members WHERE expires_at < now() - $1 * interval '1 millisecond'`, ttl.Milliseconds())
	b.Queue(`SELECT ` + memberColumns + ` FROM mink_members WHERE expires_at > now()`)
	b.Queue(`SELECT id, namespace || '.' || name, partitions FROM mink_tables`)
	b.Queue(`SELECT kind, table_id, partition, holder FROM mink_leases WHERE holder IS NOT NULL AND expires_at > now()`)
	counter(b.Len())
	br := db.SendBatch(ctx, b)
	defer br.Close()
	v := View{Self: self, Holders: map[Scope]string{}}
	names := map[int64]string{}
	if _, err := br.Exec(); err != nil {
		return v, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return v, nil, err
	}
	v.Members, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) { return scanMember(r) })
	if err != nil {
		return v, nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return v, nil, err
	}
	for rows.Next() {
		var t TableView
		var name string
		if err := rows.Scan(&t.ID, &name, &t.Partitions); err != nil {
			rows.Close()
			return v, nil, err
		}
		v.Tables = append(v.Tables, t)
		names[t.ID] = name
	}
	if err := rows.Err(); err != nil {
		return v, nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return v, nil, err
	}
	for rows.Next() {
		var s Scope
		var kind, holder string
		if err := rows.Scan(&kind, &s.Table, &s.Partition, &holder); err != nil {
			rows.Close()
			return v, nil, err
		}
		s.Kind = Kind(kind)
		v.Holders[s] = holder
	}
	sort.Slice(v.Tables, func(i, j int) bool { return v.Tables[i].ID < v.Tables[j].ID })
	return v, names, rows.Err()
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

// scanLeases reads rows of (kind, table_id, partition, table name, epoch, expires_at).
func scanLeases(rows pgx.Rows, holder string) ([]Lease, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		var kind string
		err := r.Scan(&kind, &l.Table, &l.Partition, &l.TableName, &l.Epoch, &l.Expires)
		l.Kind, l.Holder = Kind(kind), holder
		return l, err
	})
}
