package lease

import (
	"context"
	"errors"
	"fmt"
	"sort"
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

// AddScopes makes the lease rows of a table with the given partition count: its writer
// lease and one partition lease per partition. Partitions only grow (as in Kafka); rows
// that exist are kept with their holders and epochs. Call it in the transaction that
// creates or updates the table (and its partition count) so nothing is half-created.
func AddScopes(ctx context.Context, db pg.DB, table int64, partitions int32) error {
	_, err := db.Exec(ctx, `INSERT INTO mink_leases (kind, table_id, partition)
		SELECT 'writer', $1::bigint, -1
		UNION ALL
		SELECT 'partition', $1::bigint, p FROM generate_series(0, $2::int - 1) AS p
		ON CONFLICT DO NOTHING`, table, partitions)
	if err != nil {
		return fmt.Errorf("lease: add scopes of table %d: %w", table, err)
	}
	return nil
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

// MemberExpiry is when node's member row expires, or expired: a row is kept until a
// round deletes it, a lease_ttl after its expiry. found is false when there is none.
func MemberExpiry(ctx context.Context, db pg.DB, node string) (expires time.Time, found bool, err error) {
	err = db.QueryRow(ctx, `SELECT expires_at FROM mink_members WHERE node_id = $1`, node).Scan(&expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	return expires, err == nil, err
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

// The statements of a node's membership and rounds (Manager): the Manager decides, these
// say it to Postgres.

// memberRow is a node's member row as registration and renewals write it.
type memberRow struct {
	node, incarnation string
	roles             []string
	grpcAddr          string
	addrs             map[string]string
	version           string
	draining          bool
	ttl               time.Duration
	maxPartitions     int
}

const upsertMember = `INSERT INTO mink_members
		(node_id, incarnation, roles, grpc_addr, addrs, version, draining, max_partitions, started_at, renewed_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $9, now(), now(), now() + $8 * interval '1 millisecond')
	ON CONFLICT (node_id) DO UPDATE SET
		roles = EXCLUDED.roles, grpc_addr = EXCLUDED.grpc_addr, addrs = EXCLUDED.addrs,
		version = EXCLUDED.version, draining = EXCLUDED.draining, max_partitions = EXCLUDED.max_partitions,
		renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at`

func (r memberRow) args() []any {
	return []any{r.node, r.incarnation, r.roles, r.grpcAddr, r.addrs, r.version, r.draining, r.ttl.Milliseconds(), r.maxPartitions}
}

// lockMember reads node's member row, locked until tx ends: the incarnation that holds
// it ("" when there is none) and whether it is live.
func lockMember(ctx context.Context, tx pgx.Tx, node string) (incarnation string, live bool, err error) {
	var inc *string
	err = tx.QueryRow(ctx, `SELECT incarnation::text, expires_at > now() FROM mink_members WHERE node_id = $1 FOR UPDATE`,
		node).Scan(&inc, &live)
	if errors.Is(err, pgx.ErrNoRows) || inc == nil {
		return "", false, nil
	}
	return *inc, live, err
}

// registerMember inserts r, taking the row over from any other incarnation of the node:
// the database times at which it started and expires.
func registerMember(ctx context.Context, tx pgx.Tx, r memberRow) (startedAt, expires time.Time, err error) {
	err = tx.QueryRow(ctx, upsertMember+`, incarnation = EXCLUDED.incarnation, started_at = EXCLUDED.started_at
		RETURNING started_at, expires_at`, r.args()...).Scan(&startedAt, &expires)
	return startedAt, expires, err
}

// renewMember renews r if its incarnation still holds the row (pgx.ErrNoRows when
// another took it over): inserted is true when the row had expired and been deleted, and
// was inserted again.
func renewMember(ctx context.Context, db pg.DB, r memberRow) (inserted bool, expires time.Time, err error) {
	err = db.QueryRow(ctx, upsertMember+` WHERE mink_members.incarnation = $2 RETURNING (xmax = 0), expires_at`,
		r.args()...).Scan(&inserted, &expires)
	return inserted, expires, err
}

// retire records an incarnation replaced by another: the rounds free what it holds.
func retire(ctx context.Context, tx pgx.Tx, node, incarnation string) error {
	_, err := tx.Exec(ctx, `INSERT INTO mink_retired (node_id, incarnation) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		node, incarnation)
	return err
}

// refuseReplaced records an incarnation replaced by another as gone for good (mink_left):
// Postgres refuses its member row from then on.
func refuseReplaced(ctx context.Context, tx pgx.Tx, node, incarnation string) error {
	_, err := tx.Exec(ctx, `INSERT INTO mink_left (node_id, incarnation, left_at, replaced) VALUES ($1, $2, now(), true)
		ON CONFLICT (node_id, incarnation) DO NOTHING`, node, incarnation)
	return err
}

// adopt moves the leases that incarnation old of node holds to incarnation inc, each
// under a new epoch, skipping those a fenced write in flight holds; they expire at
// expires.
func adopt(ctx context.Context, tx pgx.Tx, node, inc, old string, expires time.Time) ([]Lease, error) {
	rows, err := tx.Query(ctx, `WITH mine AS (
			SELECT kind, table_id, partition FROM mink_leases WHERE holder = $1 AND incarnation = $3
			FOR UPDATE SKIP LOCKED)
		UPDATE mink_leases l SET incarnation = $2, epoch = l.epoch + 1, acquired_at = now()
		FROM mine w, mink_tables t
		WHERE l.kind = w.kind AND l.table_id = w.table_id AND l.partition = w.partition AND t.id = l.table_id
		RETURNING l.kind, l.table_id, l.partition, t.namespace || '.' || t.name, l.epoch`,
		node, inc, old)
	if err != nil {
		return nil, err
	}
	return scanLeases(rows, node, expires)
}

// janitor frees the leases of members whose rows expired, a full lease_ttl after they
// last renewed and never sooner, and deletes those rows; it frees what retired
// incarnations (member rows gone or taken over) still hold; and it forgets old records of
// clean leaves. It never waits on a lock: a member row being renewed (or acquired under),
// or a lease row that a fenced write in flight holds, is skipped; the incarnation that
// held such a lease is kept in mink_retired, and a later round frees the lease once the
// write has ended.
const janitor = `WITH dead AS (
		DELETE FROM mink_members WHERE node_id IN (
			SELECT node_id FROM mink_members WHERE expires_at <= now() FOR UPDATE SKIP LOCKED)
		RETURNING node_id, incarnation
	), gone AS (
		SELECT node_id, incarnation FROM dead
		UNION SELECT node_id, incarnation FROM mink_retired
	), owned AS (
		SELECT l.kind, l.table_id, l.partition, l.holder, l.incarnation
		FROM mink_leases l JOIN gone g ON l.holder = g.node_id AND l.incarnation = g.incarnation
	), free AS (
		SELECT l.kind, l.table_id, l.partition
		FROM mink_leases l JOIN gone g ON l.holder = g.node_id AND l.incarnation = g.incarnation
		FOR UPDATE OF l SKIP LOCKED
	), freed AS (
		UPDATE mink_leases l SET holder = NULL, incarnation = NULL FROM free f
		WHERE l.kind = f.kind AND l.table_id = f.table_id AND l.partition = f.partition
		RETURNING 1
	), kept AS (
		SELECT DISTINCT o.holder AS node_id, o.incarnation FROM owned o
		WHERE NOT EXISTS (SELECT 1 FROM free f WHERE f.kind = o.kind AND f.table_id = o.table_id AND f.partition = o.partition)
	), retire AS (
		INSERT INTO mink_retired (node_id, incarnation) SELECT node_id, incarnation FROM kept
		ON CONFLICT DO NOTHING RETURNING 1
	), unretire AS (
		DELETE FROM mink_retired r USING gone g
		WHERE r.node_id = g.node_id AND r.incarnation = g.incarnation
		  AND NOT EXISTS (SELECT 1 FROM kept k WHERE k.node_id = r.node_id AND k.incarnation = r.incarnation)
		RETURNING 1
	), forget AS (
		DELETE FROM mink_left WHERE left_at < now() - interval '` + leftKept + `' RETURNING 1
	)
	SELECT (SELECT count(*) FROM dead) + (SELECT count(*) FROM freed) + (SELECT count(*) FROM retire) + (SELECT count(*) FROM unretire)
		+ (SELECT count(*) FROM forget)`

// leftKept is how long the record of a clean leave is kept: far longer than a statement
// sent before the leave can still reach Postgres (Linux gives up retransmitting on a TCP
// connection after about 15 minutes).
const leftKept = "1 day"

// roundReads is what a round reads after its renewal, in one batch of roundStatements.
type roundReads struct {
	cleaned               int64 // rows the janitor deleted, freed or recorded
	membersGen, tablesGen int64
	// The free leases: per table, how many partition leases; the tables whose writer
	// lease is free; and how many rows said so.
	freeParts   map[int64]int32
	freeWriters map[int64]bool
	freeRows    int64
}

const roundStatements = 3

// readRound runs the janitor and reads the generations and the free leases.
func readRound(ctx context.Context, db pg.DB) (roundReads, error) {
	b := &pgx.Batch{}
	b.Queue(janitor)
	b.Queue(`SELECT coalesce(sum(gen) FILTER (WHERE name = 'members'), 0), coalesce(sum(gen) FILTER (WHERE name = 'tables'), 0)
		FROM mink_generations`)
	b.Queue(`SELECT kind, table_id, count(*) FROM mink_leases WHERE holder IS NULL GROUP BY kind, table_id`)
	rr := roundReads{freeParts: map[int64]int32{}, freeWriters: map[int64]bool{}}
	br := db.SendBatch(ctx, b)
	defer br.Close()
	if err := br.QueryRow().Scan(&rr.cleaned); err != nil {
		return rr, fmt.Errorf("lease: free the leases of expired members: %w", err)
	}
	if err := br.QueryRow().Scan(&rr.membersGen, &rr.tablesGen); err != nil {
		return rr, fmt.Errorf("lease: read generations: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return rr, fmt.Errorf("lease: read free leases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var table, n int64
		if err := rows.Scan(&kind, &table, &n); err != nil {
			return rr, fmt.Errorf("lease: read free leases: %w", err)
		}
		rr.freeRows++
		if Kind(kind) == KindWriter {
			rr.freeWriters[table] = true
		} else {
			rr.freeParts[table] = int32(n)
		}
	}
	if err := rows.Err(); err != nil {
		return rr, fmt.Errorf("lease: read free leases: %w", err)
	}
	rows.Close()
	return rr, br.Close()
}

// readTables reads every table's id and partition count, by id, and its name.
func readTables(ctx context.Context, db pg.DB) ([]TableView, map[int64]string, error) {
	rows, err := db.Query(ctx, `SELECT id, namespace || '.' || name, partitions FROM mink_tables`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	tables := []TableView{}
	names := map[int64]string{}
	for rows.Next() {
		var t TableView
		var name string
		if err := rows.Scan(&t.ID, &name, &t.Partitions); err != nil {
			return nil, nil, err
		}
		tables = append(tables, t)
		names[t.ID] = name
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].ID < tables[j].ID })
	return tables, names, nil
}

// readFree reads, for each table of tables, up to counts of its free partitions, the
// ones the node prefers most: keys are its preferences (a key per partition, table after
// table, each table's from offsets, parts of them), and a partition beyond them (the
// table grew since the node read it) has none: NULL sorts last, and the scope name breaks
// ties as in prefers. It returns the rows read too.
func readFree(ctx context.Context, db pg.DB, tables []int64, counts []int32, offsets []int64, parts []int32, keys []int64) (map[int64][]int32, int64, error) {
	rows, err := db.Query(ctx, `SELECT w.table_id, f.partition
		FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::int[]) AS w(table_id, n, off, parts)
		CROSS JOIN LATERAL (
			SELECT l.partition FROM mink_leases l
			WHERE l.holder IS NULL AND l.kind = 'partition' AND l.table_id = w.table_id
			ORDER BY CASE WHEN l.partition < w.parts THEN ($5::bigint[])[w.off + l.partition + 1] END DESC NULLS LAST,
				('partition/' || l.table_id || '/' || l.partition) COLLATE "C"
			LIMIT w.n) f`, tables, counts, offsets, parts, keys)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := map[int64][]int32{}
	var n int64
	for rows.Next() {
		var t int64
		var p int32
		if err := rows.Scan(&t, &p); err != nil {
			return nil, n, err
		}
		out[t] = append(out[t], p)
		n++
	}
	return out, n, rows.Err()
}

// acquire takes those of ss that are free for incarnation inc of node, in one statement,
// and returns the leases it got. A lease another node is taking at the same moment is
// skipped, not waited for. The member row is locked FOR KEY SHARE (which renewals do not
// wait for): a leave, or a janitor deleting the row as it expires, then waits for this
// statement or skips the row, and frees what it took, instead of freeing the leases from
// a snapshot without them and leaving them held by a member row that is gone, which
// nothing would ever free.
func acquire(ctx context.Context, db pg.DB, node, inc string, ss []Scope) ([]Lease, error) {
	kinds, tables, parts := scopeArrays(ss)
	rows, err := db.Query(ctx, `WITH me AS (
			SELECT expires_at FROM mink_members
			WHERE node_id = $1 AND incarnation = $2 AND expires_at > now() AND NOT draining
			FOR KEY SHARE
		), want AS (
			SELECT l.kind, l.table_id, l.partition FROM mink_leases l
			JOIN unnest($3::text[], $4::bigint[], $5::int[]) AS w(kind, table_id, partition)
			  ON l.kind = w.kind AND l.table_id = w.table_id AND l.partition = w.partition
			WHERE l.holder IS NULL
			FOR UPDATE OF l SKIP LOCKED)
		UPDATE mink_leases l SET holder = $1, incarnation = $2, epoch = l.epoch + 1, acquired_at = now()
		FROM want w, me m, mink_tables t
		WHERE l.kind = w.kind AND l.table_id = w.table_id AND l.partition = w.partition
		  AND t.id = l.table_id
		RETURNING l.kind, l.table_id, l.partition, t.namespace || '.' || t.name, l.epoch, m.expires_at`,
		node, inc, kinds, tables, parts)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		var kind string
		err := r.Scan(&kind, &l.Table, &l.Partition, &l.TableName, &l.Epoch, &l.Expires)
		l.Kind, l.Holder = Kind(kind), node
		return l, err
	})
}

// free releases those of ls that incarnation inc of node still holds at their epochs,
// skipping a lease row a fenced write in flight holds, and returns the scopes it freed.
func free(ctx context.Context, db pg.DB, node, inc string, ls map[Scope]Lease) ([]Scope, error) {
	kinds, tables, parts, epochs := leaseArrays(ls)
	rows, err := db.Query(ctx, `WITH mine AS (
			SELECT l.kind, l.table_id, l.partition FROM mink_leases l
			JOIN unnest($3::text[], $4::bigint[], $5::int[], $6::bigint[]) AS w(kind, table_id, partition, epoch)
			  ON l.kind = w.kind AND l.table_id = w.table_id AND l.partition = w.partition AND l.epoch = w.epoch
			WHERE l.holder = $1 AND l.incarnation = $2
			FOR UPDATE OF l SKIP LOCKED)
		UPDATE mink_leases l SET holder = NULL, incarnation = NULL FROM mine w
		WHERE l.kind = w.kind AND l.table_id = w.table_id AND l.partition = w.partition
		RETURNING l.kind, l.table_id, l.partition`,
		node, inc, kinds, tables, parts, epochs)
	if err != nil {
		return nil, err
	}
	return collectScopes(rows)
}

// stillHeld returns those of ls that incarnation inc of node holds at their epochs.
func stillHeld(ctx context.Context, db pg.DB, node, inc string, ls map[Scope]Lease) ([]Scope, error) {
	kinds, tables, parts, epochs := leaseArrays(ls)
	rows, err := db.Query(ctx, `SELECT l.kind, l.table_id, l.partition FROM mink_leases l
		JOIN unnest($3::text[], $4::bigint[], $5::int[], $6::bigint[]) AS w(kind, table_id, partition, epoch)
		  ON l.kind = w.kind AND l.table_id = w.table_id AND l.partition = w.partition AND l.epoch = w.epoch
		WHERE l.holder = $1 AND l.incarnation = $2`, node, inc, kinds, tables, parts, epochs)
	if err != nil {
		return nil, err
	}
	return collectScopes(rows)
}

// newEpochs gives the leases of scopes that incarnation inc of node holds at epochs a
// new epoch each, in one statement, and returns them with it (scope and epoch only).
func newEpochs(ctx context.Context, db pg.DB, node, inc string, scopes []Scope, epochs []int64) ([]Lease, error) {
	kinds, tables, parts := scopeArrays(scopes)
	rows, err := db.Query(ctx, `UPDATE mink_leases l SET epoch = l.epoch + 1, acquired_at = now()
		FROM unnest($3::text[], $4::bigint[], $5::int[], $6::bigint[]) AS w(kind, table_id, partition, epoch)
		WHERE l.kind = w.kind AND l.table_id = w.table_id AND l.partition = w.partition AND l.epoch = w.epoch
		  AND l.holder = $1 AND l.incarnation = $2
		RETURNING l.kind, l.table_id, l.partition, l.epoch`, node, inc, kinds, tables, parts, epochs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var l Lease
		var kind string
		err := r.Scan(&kind, &l.Table, &l.Partition, &l.Epoch)
		l.Kind = Kind(kind)
		return l, err
	})
}

// recordLeft records that incarnation inc of node left the cluster (mink_left): it waits
// for any insertion of its member row in flight to commit, and from its commit on
// Postgres refuses every later one. It returns the rows it wrote.
func recordLeft(ctx context.Context, tx pgx.Tx, node, inc string) (int64, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO mink_left (node_id, incarnation, left_at) VALUES ($1, $2::uuid, now())
		ON CONFLICT DO NOTHING`, node, inc)
	return tag.RowsAffected(), err
}

// deleteMember deletes the member row of incarnation inc of node, returning the rows it
// deleted.
func deleteMember(ctx context.Context, tx pgx.Tx, node, inc string) (int64, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM mink_members WHERE node_id = $1 AND incarnation = $2::uuid`, node, inc)
	return tag.RowsAffected(), err
}

// freeAll frees every lease incarnation inc of node holds, but those a fenced write in
// flight holds (kept), whose incarnation it retires so that the rounds free them once
// the write ends.
func freeAll(ctx context.Context, tx pgx.Tx, node, inc string) (freed, kept int64, err error) {
	err = tx.QueryRow(ctx, `WITH free AS (
		SELECT kind, table_id, partition FROM mink_leases WHERE holder = $1 AND incarnation = $2::uuid
		FOR UPDATE SKIP LOCKED
	), freed AS (
		UPDATE mink_leases l SET holder = NULL, incarnation = NULL FROM free f
		WHERE l.kind = f.kind AND l.table_id = f.table_id AND l.partition = f.partition
		RETURNING 1
	), kept AS (
		SELECT 1 FROM mink_leases l WHERE l.holder = $1 AND l.incarnation = $2::uuid
		  AND NOT EXISTS (SELECT 1 FROM free f WHERE f.kind = l.kind AND f.table_id = l.table_id AND f.partition = l.partition)
		LIMIT 1
	), retire AS (
		INSERT INTO mink_retired (node_id, incarnation) SELECT $1, $2::uuid FROM kept ON CONFLICT DO NOTHING
	)
	SELECT (SELECT count(*) FROM freed), (SELECT count(*) FROM kept)`, node, inc).Scan(&freed, &kept)
	return freed, kept, err
}
