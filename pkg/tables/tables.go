// Package tables holds Mink's table definitions: a table is a Kafka topic plus a record
// format, declared columns and properties, under a namespace. Creating one makes, in one
// transaction, its row, its partitions' index rows and its lease rows, so nothing is ever
// half-created.
package tables

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/tableschema"
)

// DefaultNamespace is the namespace of a table created without one.
const DefaultNamespace = "default"

// Table is one table definition.
type Table struct {
	ID         int64
	Namespace  string
	Name       string
	Topic      string
	Spec       tableschema.Spec
	Properties map[string]string
	Partitions int32
	CreatedAt  time.Time
}

// FullName is "namespace.name".
func (t Table) FullName() string { return t.Namespace + "." + t.Name }

// Props reads the table's properties with their defaults.
func (t Table) Props() Props {
	p, _ := ParseProps(t.Properties) // validated at creation
	return p
}

// Props are the table properties Mink itself reads, with defaults filled in.
type Props struct {
	RangeTargetBytes int64         // cut a range at this many bytes of record values
	RangeMaxAge      time.Duration // ... or this long after its first record
	CommitInterval   time.Duration // writer: how often new ranges become a snapshot

	// Live loads (file servers): a table load adds the records Kafka holds beyond the
	// committed snapshot, read_committed, as tail files of a load snapshot.
	LiveLoad bool // on unless mink.live-load is false
	// LiveTTL is how long a load snapshot and its tail files stay readable, even after
	// newer commits (and how long the writer keeps a snapshot after a newer one
	// replaced it, so that load snapshots built on it keep their files; see
	// icebergmeta.RetentionOf).
	LiveTTL time.Duration
	// LiveMaxRecords bounds a partition's tail, in offsets past the committed end: a
	// larger tail is cut there, and the load snapshot's summary says so.
	LiveMaxRecords int64
	// LiveMaxBytes bounds the record bytes (keys, values, headers) one load reads from
	// Kafka per partition to build tail files; a build that reaches it is cut there.
	LiveMaxBytes int64
}

// Property keys Mink reads; other keys are kept and served as Iceberg table properties.
const (
	PropRangeTargetBytes = "mink.range.target-bytes"
	PropRangeMaxAge      = "mink.range.max-age"
	PropCommitInterval   = "mink.commit.interval"

	PropLiveLoad       = "mink.live-load"        // "true" (default) or "false"
	PropLiveTTL        = "mink.live.ttl"         // duration, 1s to 24h
	PropLiveMaxRecords = "mink.live.max-records" // offsets per partition, 1 to 1e9
	PropLiveMaxBytes   = "mink.live.max-bytes"   // bytes per partition, 1 to 16 GiB
)

// DefaultProps are the defaults of the properties Mink reads.
var DefaultProps = Props{RangeTargetBytes: 128 << 20, RangeMaxAge: 10 * time.Second, CommitInterval: 5 * time.Second,
	LiveLoad: true, LiveTTL: 15 * time.Minute, LiveMaxRecords: 1_000_000, LiveMaxBytes: 64 << 20}

// ParseProps validates the properties Mink reads; errors name the key.
func ParseProps(m map[string]string) (Props, error) {
	p := DefaultProps
	for k, v := range m {
		field := fmt.Sprintf("properties[%q]", k)
		switch k {
		case PropRangeTargetBytes:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1024 || n > 1<<31 {
				return p, apierr.Invalid(field, "want a byte count from 1024 to 2147483648, got %q", v)
			}
			p.RangeTargetBytes = n
		case PropRangeMaxAge, PropCommitInterval:
			d, err := time.ParseDuration(v)
			if err != nil || d < 10*time.Millisecond || d > 24*time.Hour {
				return p, apierr.Invalid(field, "want a duration from 10ms to 24h such as \"10s\", got %q", v)
			}
			if k == PropRangeMaxAge {
				p.RangeMaxAge = d
			} else {
				p.CommitInterval = d
			}
		case PropLiveLoad:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return p, apierr.Invalid(field, "want \"true\" or \"false\", got %q", v)
			}
			p.LiveLoad = b
		case PropLiveTTL:
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second || d > 24*time.Hour {
				return p, apierr.Invalid(field, "want a duration from 1s to 24h such as \"15m\", got %q", v)
			}
			p.LiveTTL = d
		case PropLiveMaxRecords:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > 1_000_000_000 {
				return p, apierr.Invalid(field, "want a record count from 1 to 1000000000, got %q", v)
			}
			p.LiveMaxRecords = n
		case PropLiveMaxBytes:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > 1<<34 {
				return p, apierr.Invalid(field, "want a byte count from 1 to 17179869184, got %q", v)
			}
			p.LiveMaxBytes = n
		}
	}
	return p, nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,127}$`)

// topicRE is Kafka's own rule for topic names.
var topicRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// Validate checks a table definition before it is created; errors name the field.
func (t *Table) Validate() error {
	if t.Namespace == "" {
		t.Namespace = DefaultNamespace
	}
	if !identRE.MatchString(t.Namespace) {
		return apierr.Invalid("namespace", "%q is not a valid namespace (letters, digits, _ and -, starting with a letter or _)", t.Namespace)
	}
	if !identRE.MatchString(t.Name) {
		return apierr.Invalid("name", "%q is not a valid table name (letters, digits, _ and -, starting with a letter or _)", t.Name)
	}
	if t.Topic == "" {
		t.Topic = t.Name
	}
	if !topicRE.MatchString(t.Topic) || t.Topic == "." || t.Topic == ".." {
		return apierr.Invalid("topic", "%q is not a valid Kafka topic name", t.Topic)
	}
	if err := t.Spec.Validate(); err != nil {
		var fe *tableschema.FieldError
		if errors.As(err, &fe) {
			return apierr.Invalid(fe.Field, "%s", fe.Reason)
		}
		return apierr.Invalid("columns", "%v", err)
	}
	if _, err := ParseProps(t.Properties); err != nil {
		return err
	}
	return nil
}

// Create validates t and creates it with partitions partitions (read from Kafka by the
// caller), its index rows and its lease rows, in one transaction.
func Create(ctx context.Context, db lease.DB, t Table, partitions int32) (Table, error) {
	if err := t.Validate(); err != nil {
		return Table{}, err
	}
	if partitions < 1 {
		return Table{}, apierr.New(apierr.FailedPrecondition, "topic %q has no partitions", t.Topic)
	}
	if t.Properties == nil {
		t.Properties = map[string]string{}
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO mink_tables (namespace, name, topic, partitions, spec, properties)
			VALUES ($1, $2, $3, 0, $4, $5) RETURNING id, created_at`,
			t.Namespace, t.Name, t.Topic, t.Spec, t.Properties).Scan(&t.ID, &t.CreatedAt)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return apierr.New(apierr.AlreadyExists, "table %s already exists", t.FullName())
		}
		if err != nil {
			return err
		}
		return addPartitions(ctx, tx, t.ID, partitions)
	})
	if err != nil {
		return Table{}, err
	}
	t.Partitions = partitions
	return t, nil
}

func addPartitions(ctx context.Context, tx pgx.Tx, table int64, partitions int32) error {
	if _, err := tx.Exec(ctx, `INSERT INTO mink_partitions (table_id, partition)
		SELECT $1::bigint, p FROM generate_series(0, $2::int - 1) AS p ON CONFLICT DO NOTHING`, table, partitions); err != nil {
		return err
	}
	return lease.AddScopes(ctx, tx, table, partitions)
}

// Grow records that the table's topic now has partitions partitions (Kafka only adds
// partitions): new index rows and new partition leases, which indexers then take.
// It reports whether anything was added.
func Grow(ctx context.Context, db lease.DB, table int64, partitions int32) (bool, error) {
	grew := false
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var cur int32
		if err := tx.QueryRow(ctx, `SELECT partitions FROM mink_tables WHERE id = $1 FOR UPDATE`, table).Scan(&cur); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return apierr.New(apierr.NotFound, "table %d does not exist", table)
			}
			return err
		}
		if partitions <= cur {
			return nil
		}
		grew = true
		return addPartitions(ctx, tx, table, partitions)
	})
	return grew, err
}

// Drop deletes a table with its index and leases. Holders of its leases find them gone
// at their next round or fenced write.
func Drop(ctx context.Context, db lease.DB, namespace, name string) error {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	tag, err := db.Exec(ctx, `DELETE FROM mink_tables WHERE namespace = $1 AND name = $2`, namespace, name)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return apierr.New(apierr.NotFound, "table %s.%s does not exist", namespace, name)
	}
	return nil
}

const columns = `id, namespace, name, topic, spec, properties, partitions, created_at`

func scan(row pgx.Row) (Table, error) {
	var t Table
	err := row.Scan(&t.ID, &t.Namespace, &t.Name, &t.Topic, &t.Spec, &t.Properties, &t.Partitions, &t.CreatedAt)
	return t, err
}

// Get returns one table by name.
func Get(ctx context.Context, db lease.DB, namespace, name string) (Table, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	t, err := scan(db.QueryRow(ctx, `SELECT `+columns+` FROM mink_tables WHERE namespace = $1 AND name = $2`, namespace, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return Table{}, apierr.New(apierr.NotFound, "table %s.%s does not exist", namespace, name)
	}
	return t, err
}

// GetByID returns one table by id.
func GetByID(ctx context.Context, db lease.DB, id int64) (Table, error) {
	t, err := scan(db.QueryRow(ctx, `SELECT `+columns+` FROM mink_tables WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Table{}, apierr.New(apierr.NotFound, "table %d does not exist", id)
	}
	return t, err
}

// List returns the tables of one namespace ("" = all), by namespace and name.
func List(ctx context.Context, db lease.DB, namespace string) ([]Table, error) {
	rows, err := db.Query(ctx, `SELECT `+columns+` FROM mink_tables WHERE $1 = '' OR namespace = $1 ORDER BY namespace, name`, namespace)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) { return scan(r) })
}

// Namespaces returns every namespace that has a table.
func Namespaces(ctx context.Context, db lease.DB) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT namespace FROM mink_tables`)
	if err != nil {
		return nil, err
	}
	ns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	sort.Strings(ns)
	return ns, err
}
