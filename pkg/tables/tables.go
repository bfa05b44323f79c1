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
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/names"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/ranges"
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
	// Version is the current version of the table's schema (tableschema.Version.ID):
	// new ranges are built with it.
	Version int
	// Mode is what the table's rows are: every record (ModeAppend, the default) or the
	// latest record per key (ModeUpsert). Fixed at creation.
	Mode Mode
	// TopicID is the incarnation of the topic the table indexes (kafkasrc.TopicID's
	// String); "" until known (a broker without topic ids, or a table older than them).
	TopicID string
	// TopicLost says why the table's topic is no longer the one it indexed (deleted and
	// created again, or truncated below the indexed offsets), since TopicLostAt; "" while
	// it is. Such a table is neither loaded nor indexed until it is reset (Reset).
	TopicLost   string
	TopicLostAt time.Time
	// PartitionSpec is the partition spec stored with the current version (what new
	// ranges are to be indexed with); nil: the default, identity(_kafka_partition)
	// (Partitioning). On creation, the spec to store, bound to the first schema.
	PartitionSpec *partition.Spec
}

// Mode is a table's mode.
type Mode string

const (
	ModeAppend Mode = "append" // every Kafka record is a row
	ModeUpsert Mode = "upsert" // the latest record per key and partition; tombstones delete
)

// Upsert reports whether the table keeps the latest record per key.
func (t Table) Upsert() bool { return t.Mode == ModeUpsert }

// Partitioning is the table's partition spec over schema, its current version's: the
// stored one, or the default identity(_kafka_partition) (spec 0) when none is stored.
func (t Table) Partitioning(schema *iceberg.Schema) (partition.Spec, error) {
	if t.PartitionSpec != nil {
		return *t.PartitionSpec, nil
	}
	return partition.KafkaPartitionSpec(schema)
}

// CheckPartitioning is nil when the table's spec over schema is the default,
// identity(_kafka_partition), the only one Mink indexes by yet; otherwise a
// FailedPrecondition naming the spec. Until files are built per partition tuple
// (docs/design/partition-specs.md), a table stored with another spec (by a newer node)
// is not indexed by _kafka_partition, which would not be what it says.
func (t Table) CheckPartitioning(schema *iceberg.Schema) error {
	if t.PartitionSpec == nil {
		return nil
	}
	def, err := partition.KafkaPartitionSpec(schema)
	if err != nil {
		return err
	}
	if t.PartitionSpec.Equal(def) {
		return nil
	}
	var fields []string
	for _, f := range t.PartitionSpec.Describe(schema) {
		fields = append(fields, f.String())
	}
	return apierr.New(apierr.FailedPrecondition, "table %s is partitioned by %s: this version of Mink indexes only tables partitioned by identity(_kafka_partition) (partition specs are not supported yet)",
		t.FullName(), strings.Join(fields, ", "))
}

// FullName is "namespace.name".
func (t Table) FullName() string { return t.Namespace + "." + t.Name }

// Props reads the table's properties with their defaults.
func (t Table) Props() Props {
	p, _ := ParseProps(t.Properties) // validated when set; a bad value keeps its default
	return p
}

// Props are the table properties Mink itself reads, with defaults filled in.
type Props struct {
	RangeTargetBytes int64         // cut a range at this many bytes of record values
	RangeMaxAge      time.Duration // ... or this long after its first record
	CommitInterval   time.Duration // writer: how often new ranges become a snapshot

	// Writer maintenance: assembly merges small files towards AssemblyTargetBytes,
	// AssemblyTierFiles files of one size tier at a time (pkg/assembly); expiry,
	// assembly and collection run every MaintenanceInterval, and assembly also after a
	// commit that adds files.
	AssemblyTargetBytes int64
	AssemblyTierFiles   int
	MaintenanceInterval time.Duration

	// Live loads (file servers): a table load adds the records Kafka holds beyond the
	// committed snapshot, read_committed, as tail files of a load snapshot.
	LiveLoad bool // on unless mink.live-load is false
	// StopInference: an inferred JSON table gains no more columns from its records
	// (mink.schema.infer false); fields it lacks are kept in _mink_unfit.
	StopInference bool
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
	// LiveReuse is how stale a load's tail may be: a load answers with the newest load
	// snapshot of the same committed metadata whose Kafka offsets were read less than
	// this long before the load arrived. A load in its last LiveRefreshAhead begins the
	// next one, so a table writes at most about one load snapshot per LiveReuse -
	// LiveRefreshAhead however many clients load it. Zero: every load reads Kafka
	// (loads of an unchanged tail still share one snapshot).
	LiveReuse time.Duration

	// HistoryMaxSnapshots caps the snapshots the writer keeps, however young, so that a
	// table committing often loads in bounded metadata (pkg/icebergmeta.Retention).
	HistoryMaxSnapshots int
}

// LiveRefreshAhead is how long before the newest load snapshot of a table stops
// standing for new loads (after LiveReuse) a load begins reading the next one without
// waiting for it: a quarter of LiveReuse, so that loads arriving without pause find a
// snapshot made rather than each wait for a build.
func (p Props) LiveRefreshAhead() time.Duration { return p.LiveReuse / 4 }

// LiveSnapshotSpacing is the least time between the Kafka offsets of two load snapshots
// of one committed snapshot: at most one per this long, however many clients load.
func (p Props) LiveSnapshotSpacing() time.Duration { return p.LiveReuse - p.LiveRefreshAhead() }

// Property keys Mink reads; other keys are kept and served as Iceberg table properties.
const (
	PropRangeTargetBytes = "mink.range.target-bytes"
	PropRangeMaxAge      = "mink.range.max-age"
	PropCommitInterval   = "mink.commit.interval"

	PropAssemblyTargetBytes = "mink.assembly.target-bytes" // 1 KiB to 16 GiB
	PropAssemblyTierFiles   = "mink.assembly.tier-files"   // 2 to 64
	PropMaintenanceInterval = "mink.maintenance.interval"  // 10ms to 24h

	PropLiveLoad       = "mink.live-load"        // "true" (default) or "false"
	PropSchemaInfer    = "mink.schema.infer"     // "true" (default) or "false": an inferred table gains columns
	PropLiveTTL        = "mink.live.ttl"         // duration, 1s to 24h
	PropLiveMaxRecords = "mink.live.max-records" // offsets per partition, 1 to 1e9
	PropLiveMaxBytes   = "mink.live.max-bytes"   // bytes per partition, 1 to 16 GiB
	PropLiveReuseMs    = "mink.live.reuse-ms"    // milliseconds, 0 to 60000

	PropHistoryMaxSnapshots = "mink.history.max-snapshots" // 1 to 1000000
)

// DefaultProps are the defaults of the properties Mink reads.
var DefaultProps = Props{RangeTargetBytes: 128 << 20, RangeMaxAge: 10 * time.Second, CommitInterval: 5 * time.Second,
	AssemblyTargetBytes: 128 << 20, AssemblyTierFiles: 4, MaintenanceInterval: time.Minute,
	LiveLoad: true, LiveTTL: 15 * time.Minute, LiveMaxRecords: 1_000_000, LiveMaxBytes: 64 << 20, LiveReuse: 100 * time.Millisecond,
	HistoryMaxSnapshots: 100}

// A property's rule: how its value is checked and where it goes in Props (nil: checked
// only; pkg/icebergmeta reads Iceberg's own keys).
type propRule struct {
	check func(v string) (any, bool)
	want  string // what a good value is, for the error
	set   func(p *Props, v any)
}

func intIn(lo, hi int64) func(string) (any, bool) {
	return func(v string) (any, bool) {
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil && n >= lo && n <= hi
	}
}

func durationIn(lo, hi time.Duration) func(string) (any, bool) {
	return func(v string) (any, bool) {
		d, err := time.ParseDuration(v)
		return d, err == nil && d >= lo && d <= hi
	}
}

func boolean(v string) (any, bool) {
	b, err := strconv.ParseBool(v)
	return b, err == nil
}

var propRules = map[string]propRule{
	PropRangeTargetBytes: {intIn(1024, 1<<31), "a byte count from 1024 to 2147483648", func(p *Props, v any) { p.RangeTargetBytes = v.(int64) }},
	PropRangeMaxAge:      {durationIn(10*time.Millisecond, 24*time.Hour), `a duration from 10ms to 24h such as "10s"`, func(p *Props, v any) { p.RangeMaxAge = v.(time.Duration) }},
	PropCommitInterval:   {durationIn(10*time.Millisecond, 24*time.Hour), `a duration from 10ms to 24h such as "10s"`, func(p *Props, v any) { p.CommitInterval = v.(time.Duration) }},

	PropAssemblyTargetBytes: {intIn(1024, 1<<34), "a byte count from 1024 to 17179869184", func(p *Props, v any) { p.AssemblyTargetBytes = v.(int64) }},
	PropAssemblyTierFiles:   {intIn(2, 64), "a file count from 2 to 64", func(p *Props, v any) { p.AssemblyTierFiles = int(v.(int64)) }},
	PropMaintenanceInterval: {durationIn(10*time.Millisecond, 24*time.Hour), `a duration from 10ms to 24h such as "1m"`, func(p *Props, v any) { p.MaintenanceInterval = v.(time.Duration) }},

	PropLiveLoad:       {boolean, `"true" or "false"`, func(p *Props, v any) { p.LiveLoad = v.(bool) }},
	PropSchemaInfer:    {boolean, `"true" or "false"`, func(p *Props, v any) { p.StopInference = !v.(bool) }},
	PropLiveTTL:        {durationIn(time.Second, 24*time.Hour), `a duration from 1s to 24h such as "15m"`, func(p *Props, v any) { p.LiveTTL = v.(time.Duration) }},
	PropLiveMaxRecords: {intIn(1, 1_000_000_000), "a record count from 1 to 1000000000", func(p *Props, v any) { p.LiveMaxRecords = v.(int64) }},
	PropLiveMaxBytes:   {intIn(1, 1<<34), "a byte count from 1 to 17179869184", func(p *Props, v any) { p.LiveMaxBytes = v.(int64) }},
	PropLiveReuseMs: {intIn(0, 60_000), "a number of milliseconds from 0 to 60000", func(p *Props, v any) {
		p.LiveReuse = time.Duration(v.(int64)) * time.Millisecond
	}},

	PropHistoryMaxSnapshots: {intIn(1, 1_000_000), "a snapshot count from 1 to 1000000", func(p *Props, v any) { p.HistoryMaxSnapshots = int(v.(int64)) }},

	// Iceberg's own keys that Mink acts on (pkg/icebergmeta).
	"history.expire.max-snapshot-age-ms":         {intIn(1, 1<<53), "a positive number of milliseconds", nil},
	"history.expire.min-snapshots-to-keep":       {intIn(1, 1_000_000), "a snapshot count from 1 to 1000000", nil},
	"commit.manifest.min-count-to-merge":         {intIn(1, 1_000_000), "a manifest count from 1 to 1000000", nil},
	"commit.manifest.target-size-bytes":          {intIn(1024, 1<<34), "a byte count from 1024 to 17179869184", nil},
	"commit.manifest-merge.enabled":              {boolean, `"true" or "false"`, nil},
	"write.metadata.previous-versions-max":       {intIn(1, 1_000_000), "a version count from 1 to 1000000", nil},
	"write.metadata.delete-after-commit.enabled": {boolean, `"true" or "false"`, nil},
}

// ParseProps validates the properties Mink reads; errors name the key. Keys under
// "mink." that Mink does not know are refused (a typo must not pass silently); other
// keys are the user's, served as Iceberg properties. With an error, Props still holds
// every good value (defaults for the bad ones).
func ParseProps(m map[string]string) (Props, error) {
	p := DefaultProps
	var first error
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad key, the same on every call
	for _, k := range keys {
		v := m[k]
		field := fmt.Sprintf("properties[%q]", k)
		if !names.Storable(k) || !names.Storable(v) {
			// Postgres's jsonb holds no NUL; invalid UTF-8 would be stored as U+FFFD.
			if first == nil {
				first = apierr.Invalid(field, "keys and values are UTF-8 text without NUL bytes")
			}
			continue
		}
		rule, ok := propRules[k]
		if !ok {
			if strings.HasPrefix(k, "mink.") && first == nil {
				first = apierr.Invalid(field, "unknown Mink property (see the README for the mink.* properties)")
			}
			continue
		}
		val, good := rule.check(v)
		if !good {
			if first == nil {
				first = apierr.Invalid(field, "want %s, got %q", rule.want, v)
			}
			continue
		}
		if rule.set != nil {
			rule.set(&p, val)
		}
	}
	return p, first
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,127}$`)

// topicRE is Kafka's own rule for topic names.
var topicRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// Validate checks a table definition before it is created; errors name the field.
func (t *Table) Validate() error {
	if t.Namespace == "" {
		t.Namespace = DefaultNamespace
	}
	for _, n := range []struct {
		field, s string
		kind     names.Kind
	}{{"namespace", t.Namespace, names.Namespace}, {"name", t.Name, names.Table}, {"topic", t.Topic, names.Topic}} {
		if err := names.Check(n.field, n.kind, n.s); err != nil {
			return err
		}
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
	switch t.Mode {
	case "":
		t.Mode = ModeAppend
	case ModeAppend, ModeUpsert:
	default:
		return apierr.Invalid("mode", "%q is not a table mode (want append or upsert)", t.Mode)
	}
	return nil
}

// Create validates t and creates it with partitions partitions (read from Kafka by the
// caller), its index rows and its lease rows, in one transaction. Its first schema
// version is the spec's own fields (JSON and raw tables without a key format).
func Create(ctx context.Context, db pg.DB, t Table, partitions int32) (Table, error) {
	return CreateVersioned(ctx, db, t, partitions, nil, nil)
}

// CreateVersioned is Create for a table whose first schema version has the given fields
// (nil: the spec's own), made from the registry schemas given, which are stored with it.
func CreateVersioned(ctx context.Context, db pg.DB, t Table, partitions int32, fields []iceberg.NestedField, schemas []RegistrySchema) (Table, error) {
	if err := t.Validate(); err != nil {
		return Table{}, err
	}
	if fields == nil {
		var err error
		if fields, err = t.Spec.Fields(); err != nil {
			return Table{}, apierr.Invalid("format", "%v", err)
		}
	}
	first := tableschema.Version{Spec: t.Spec, Schema: iceberg.NewSchema(tableschema.SchemaID, fields...)}
	if t.PartitionSpec != nil {
		// Built against this schema by the caller (partition.Build): a source column it
		// does not hold is a caller's bug, never stored.
		if _, err := t.PartitionSpec.Iceberg(first.Schema); err != nil {
			return Table{}, fmt.Errorf("tables: partition spec of %s: %w", t.FullName(), err)
		}
	}
	if partitions < 1 {
		return Table{}, apierr.New(apierr.FailedPrecondition, "topic %q has no partitions", t.Topic)
	}
	if t.Properties == nil {
		t.Properties = map[string]string{}
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		return insert(ctx, tx, &t, partitions, first, schemas)
	})
	if err != nil {
		return Table{}, err
	}
	t.Partitions = partitions
	return t, nil
}

// insert adds t (its ID and CreatedAt set here) with its first schema version, the
// registry schemas it was made from, its index rows and its leases, in tx.
func insert(ctx context.Context, tx pgx.Tx, t *Table, partitions int32, first tableschema.Version, schemas []RegistrySchema) error {
	err := tx.QueryRow(ctx, `INSERT INTO mink_tables (namespace, name, topic, partitions, spec, properties, mode, topic_id)
		VALUES ($1, $2, $3, 0, $4, $5, $6, NULLIF($7, '')) RETURNING id, created_at`,
		t.Namespace, t.Name, t.Topic, t.Spec, t.Properties, t.Mode, t.TopicID).Scan(&t.ID, &t.CreatedAt)
	if pg.Code(err) == pg.UniqueViolation {
		return apierr.New(apierr.AlreadyExists, "table %s already exists", t.FullName())
	}
	if err != nil {
		return err
	}
	if err := storeVersion(ctx, tx, t.ID, first, t.PartitionSpec); err != nil {
		return err
	}
	for _, rs := range schemas {
		if _, err := SaveRegistrySchema(ctx, tx, t.ID, rs); err != nil {
			return err
		}
	}
	return addPartitions(ctx, tx, t.ID, partitions)
}

// Reset starts a table over from its topic as Kafka has it now (topicID, partitions):
// in one transaction it is dropped and created again under its name with its definition
// (topic, columns, properties, mode, current schema and the registry schemas it learned)
// and a new id, so its index, files, snapshots and leases start afresh, and every node
// holding a lease of the old one finds it gone. What the old table's rows were is no
// longer served: it is for a topic that was deleted and created again (TopicLost).
func Reset(ctx context.Context, db pg.DB, namespace, name, topicID string, partitions int32) (Table, error) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if partitions < 1 {
		return Table{}, apierr.New(apierr.FailedPrecondition, "table %s.%s cannot be reset: its topic has no partitions", namespace, name)
	}
	var t Table
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		old, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM mink_tables WHERE namespace = $1 AND name = $2 FOR UPDATE`, namespace, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return apierr.New(apierr.NotFound, "table %s.%s does not exist", namespace, name)
		}
		if err != nil {
			return err
		}
		v, err := GetVersion(ctx, tx, old.ID, old.Version)
		if err != nil {
			return err
		}
		schemas, err := RegistrySchemas(ctx, tx, old.ID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM mink_tables WHERE id = $1`, old.ID); err != nil {
			return err
		}
		t = Table{Namespace: old.Namespace, Name: old.Name, Topic: old.Topic, Spec: v.Spec, Properties: old.Properties,
			Mode: old.Mode, TopicID: topicID, PartitionSpec: old.PartitionSpec}
		// The new table's first version: the old one's current fields, with their ids.
		first := tableschema.Version{Spec: v.Spec, Schema: iceberg.NewSchema(tableschema.SchemaID, v.Schema.Fields()...)}
		return insert(ctx, tx, &t, partitions, first, schemas)
	})
	if err != nil {
		return Table{}, err
	}
	t.Partitions = partitions
	return t, nil
}

// RecordTopicID records the incarnation of the topic the table indexes, if none is
// recorded yet (a table older than topic ids, or created before the broker named them).
// It writes under l, a lease of the table: a holder that lost it changes nothing.
func RecordTopicID(ctx context.Context, db pg.DB, l lease.Lease, topicID string) error {
	return lease.Fenced(ctx, db, l, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE mink_tables SET topic_id = $2 WHERE id = $1 AND topic_id IS NULL`, l.Table, topicID)
		return err
	})
}

// MarkTopicLost records why the table's topic is no longer the one it indexed, unless a
// reason is recorded already (the first one stays, with its time). It writes under l, a
// lease of the table.
func MarkTopicLost(ctx context.Context, db pg.DB, l lease.Lease, why string) error {
	return lease.Fenced(ctx, db, l, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE mink_tables SET topic_lost = $2, topic_lost_at = now() WHERE id = $1 AND topic_lost IS NULL`, l.Table, why)
		return err
	})
}

func addPartitions(ctx context.Context, tx pgx.Tx, table int64, partitions int32) error {
	if err := ranges.AddPartitions(ctx, tx, table, partitions); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE mink_tables SET partitions = greatest(partitions, $2) WHERE id = $1`, table, partitions); err != nil {
		return err
	}
	return lease.AddScopes(ctx, tx, table, partitions)
}

// Grow records that the table's topic now has partitions partitions (Kafka only adds
// partitions): new index rows and new partition leases, which indexers then take.
// It reports whether anything was added. It writes under l, the table's partition-0
// lease, whose holder keeps the count current: a holder that lost it changes nothing
// (lease.ErrLeaseLost).
func Grow(ctx context.Context, db pg.DB, l lease.Lease, partitions int32) (bool, error) {
	if l.Kind != lease.KindPartition || l.Partition != 0 {
		return false, fmt.Errorf("tables: grow under %s: only the holder of partition 0 grows a table", l.Scope)
	}
	table := l.Table
	grew := false
	err := lease.Fenced(ctx, db, l, func(tx pgx.Tx) error {
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

// LockForAlter holds t's row in tx for an alter and reads its properties, version and
// partitions (into t); NotFound if it was dropped meanwhile. FOR NO KEY UPDATE: tail
// files being recorded (rows referencing the table) do not wait for it, while the alter
// waits for them on the partitions' rows.
func LockForAlter(ctx context.Context, tx pgx.Tx, t *Table) (map[string]string, error) {
	var props map[string]string
	err := tx.QueryRow(ctx, `SELECT properties, version, partitions FROM mink_tables WHERE id = $1 FOR NO KEY UPDATE`,
		t.ID).Scan(&props, &t.Version, &t.Partitions)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, apierr.New(apierr.NotFound, "table %s does not exist", t.FullName())
	}
	return props, err
}

// SetProperties replaces a table's properties (validated by the caller with ParseProps).
// The writer serves them as Iceberg properties at its next commit.
func SetProperties(ctx context.Context, db pg.DB, table int64, props map[string]string) error {
	tag, err := db.Exec(ctx, `UPDATE mink_tables SET properties = $2 WHERE id = $1`, table, props)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return apierr.New(apierr.NotFound, "table %d does not exist", table)
	}
	return nil
}

// Drop deletes a table with its index and leases. Holders of its leases find them gone
// at their next round or fenced write.
func Drop(ctx context.Context, db pg.DB, namespace, name string) error {
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

// columns are a table's, with the partition spec of its current version.
const columns = `id, namespace, name, topic, spec, properties, partitions, created_at, version, mode,
	coalesce(topic_id, ''), coalesce(topic_lost, ''), topic_lost_at,
	(SELECT v.partition_spec FROM mink_table_versions v WHERE v.table_id = mink_tables.id AND v.version = mink_tables.version)`

func scan(row pgx.Row) (Table, error) {
	var t Table
	var lostAt *time.Time
	err := row.Scan(&t.ID, &t.Namespace, &t.Name, &t.Topic, &t.Spec, &t.Properties, &t.Partitions, &t.CreatedAt, &t.Version, &t.Mode,
		&t.TopicID, &t.TopicLost, &lostAt, &t.PartitionSpec)
	if lostAt != nil {
		t.TopicLostAt = *lostAt
	}
	return t, err
}

// Get returns one table by name.
func Get(ctx context.Context, db pg.DB, namespace, name string) (Table, error) {
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
func GetByID(ctx context.Context, db pg.DB, id int64) (Table, error) {
	t, err := scan(db.QueryRow(ctx, `SELECT `+columns+` FROM mink_tables WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Table{}, apierr.New(apierr.NotFound, "table %d does not exist", id)
	}
	return t, err
}

// List returns the tables of one namespace ("" = all), by namespace and name.
func List(ctx context.Context, db pg.DB, namespace string) ([]Table, error) {
	rows, err := db.Query(ctx, `SELECT `+columns+` FROM mink_tables WHERE $1 = '' OR namespace = $1 ORDER BY namespace, name`, namespace)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Table, error) { return scan(r) })
}

// Namespaces returns every namespace that has a table.
func Namespaces(ctx context.Context, db pg.DB) ([]string, error) {
	rows, err := db.Query(ctx, `SELECT DISTINCT namespace FROM mink_tables`)
	if err != nil {
		return nil, err
	}
	ns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	sort.Strings(ns)
	return ns, err
}

// Channel is the Postgres notification channel told of every table created or dropped
// (migration 0017), so file servers refresh Live at once.
const Channel = "mink_tables"

// LiveSet is the tables that exist at one moment: their ids, and the highest id handed out
// by then. An id at or below Upto that is not in IDs is of a table dropped by then (or, for
// an instant, of one whose creation had not committed).
type LiveSet struct {
	IDs  map[int64]bool
	Upto int64
}

// Live reads which tables exist now.
func Live(ctx context.Context, db pg.DB) (LiveSet, error) {
	s := LiveSet{IDs: map[int64]bool{}}
	var ids []int64
	err := db.QueryRow(ctx, `SELECT coalesce((SELECT array_agg(id) FROM mink_tables), '{}'),
		coalesce(pg_sequence_last_value(pg_get_serial_sequence('mink_tables', 'id')::regclass), 0)`).Scan(&ids, &s.Upto)
	if err != nil {
		return LiveSet{}, err
	}
	for _, id := range ids {
		s.IDs[id] = true
		s.Upto = max(s.Upto, id)
	}
	return s, nil
}

// Exists reports whether table id exists now.
func Exists(ctx context.Context, db pg.DB, id int64) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mink_tables WHERE id = $1)`, id).Scan(&ok)
	return ok, err
}

// Gone reports whether the table id did not exist when s was read though it had been
// created: dropped.
func (s LiveSet) Gone(id int64) bool { return id <= s.Upto && !s.IDs[id] }

// TopicChanged says why the topic as Kafka has it now (its id, "" when the broker names
// none, and each partition's high watermark) is not the incarnation the table indexed,
// up to indexed (per partition, the end of what the table holds); "" when nothing says so.
// The id tells a topic deleted and created again; a partition ending below what was
// indexed tells one without ids, or truncated.
func TopicChanged(t Table, id string, high map[int32]int64, indexed map[int32]int64) string {
	if t.TopicID != "" && id != "" && id != t.TopicID {
		return fmt.Sprintf("topic %q was deleted and created again (Kafka topic id %s; the table indexed %s): the rows indexed from the old topic are no longer in Kafka",
			t.Topic, id, t.TopicID)
	}
	parts := make([]int32, 0, len(indexed))
	for p := range indexed {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		if h, ok := high[p]; ok && indexed[p] > h {
			return fmt.Sprintf("topic %q partition %d ends at offset %d, below offset %d that the table indexed: the topic was deleted and created again, or truncated, and the rows indexed beyond it are no longer in Kafka",
				t.Topic, p, h, indexed[p])
		}
	}
	return ""
}

// TopicLostError is what a table whose topic was lost (TopicLost) answers loads with:
// FailedPrecondition, why, and how to recover.
func TopicLostError(t Table, why string) error {
	return apierr.New(apierr.FailedPrecondition,
		"table %s is not served: %s; an admin resets it to index the topic as it is now, from its first offset (minkctl table reset %s, or AdminService.ResetTable)",
		t.FullName(), why, t.FullName())
}
