package tables

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Versions returns every version of a table's schema, oldest first. A table created
// before versions were stored has one: version 0 of its spec.
func Versions(ctx context.Context, db pg.DB, table int64) ([]tableschema.Version, error) {
	rows, err := db.Query(ctx, `SELECT version, schema_id, spec, schema FROM mink_table_versions
		WHERE table_id = $1 ORDER BY version`, table)
	if err != nil {
		return nil, err
	}
	vs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tableschema.Version, error) { return scanVersion(r) })
	if err != nil || len(vs) > 0 {
		return vs, err
	}
	t, err := GetByID(ctx, db, table)
	if err != nil {
		return nil, err
	}
	v, err := legacyVersion(t)
	if err != nil {
		return nil, err
	}
	return []tableschema.Version{v}, nil
}

// VersionsSince counts the versions of a table's schema after its first created in the last d, by
// Postgres's clock: how inference bounds the versions it makes per hour.
func VersionsSince(ctx context.Context, db pg.DB, table int64, d time.Duration) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM mink_table_versions WHERE table_id = $1 AND version > 0 AND created_at > now() - make_interval(secs => $2)`,
		table, d.Seconds()).Scan(&n)
	return n, err
}

// GetVersion returns one version of a table's schema.
func GetVersion(ctx context.Context, db pg.DB, table int64, version int) (tableschema.Version, error) {
	v, err := scanVersion(db.QueryRow(ctx, `SELECT version, schema_id, spec, schema FROM mink_table_versions
		WHERE table_id = $1 AND version = $2`, table, version))
	if !errors.Is(err, pgx.ErrNoRows) {
		return v, err
	}
	t, err := GetByID(ctx, db, table)
	if err != nil {
		return tableschema.Version{}, err
	}
	if version != 0 || t.Version != 0 {
		return tableschema.Version{}, apierr.New(apierr.NotFound, "table %s has no schema version %d", t.FullName(), version)
	}
	return legacyVersion(t)
}

// PartitionSpecs returns every partition spec the table's versions were stored with,
// by spec id: the specs its ranges may have been indexed with. A version stored without
// one has the default, identity(_kafka_partition), spec 0, over its schema.
func PartitionSpecs(ctx context.Context, db pg.DB, table int64) ([]partition.Spec, error) {
	vs, err := Versions(ctx, db, table)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT version, partition_spec FROM mink_table_versions WHERE table_id = $1`, table)
	if err != nil {
		return nil, err
	}
	stored := map[int]*partition.Spec{}
	var version int
	var ps *partition.Spec
	if _, err := pgx.ForEachRow(rows, []any{&version, &ps}, func() error {
		stored[version] = ps
		ps = nil // the next row's scan allocates its own
		return nil
	}); err != nil {
		return nil, err
	}
	byID := map[int]partition.Spec{}
	for _, v := range vs {
		s, err := Table{PartitionSpec: stored[v.ID]}.Partitioning(v.Schema)
		if err != nil {
			return nil, err
		}
		if _, ok := byID[s.ID]; !ok {
			byID[s.ID] = s
		}
	}
	out := make([]partition.Spec, 0, len(byID))
	for _, s := range byID {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b partition.Spec) int { return a.ID - b.ID })
	return out, nil
}

// legacyVersion is version 0 of a table that has no stored versions: its spec's fields.
func legacyVersion(t Table) (tableschema.Version, error) {
	fields, err := t.Spec.Fields()
	if err != nil {
		return tableschema.Version{}, fmt.Errorf("table %s has no stored schema: %w", t.FullName(), err)
	}
	return tableschema.Version{Spec: t.Spec, Schema: iceberg.NewSchema(tableschema.SchemaID, fields...)}, nil
}

func scanVersion(row pgx.Row) (tableschema.Version, error) {
	var v tableschema.Version
	var schemaID int
	var schema []byte
	if err := row.Scan(&v.ID, &schemaID, &v.Spec, &schema); err != nil {
		return v, err
	}
	v.Schema = new(iceberg.Schema)
	if err := json.Unmarshal(schema, v.Schema); err != nil {
		return v, fmt.Errorf("stored schema of version %d: %w", v.ID, err)
	}
	v.Schema.ID = schemaID
	return v, nil
}

// storeVersion adds version v (ID and Schema.ID already chosen) in tx, its ranges to be
// indexed with partition spec ps (nil: the default).
func storeVersion(ctx context.Context, tx pgx.Tx, table int64, v tableschema.Version, ps *partition.Spec) error {
	schema, err := json.Marshal(v.Schema)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO mink_table_versions (table_id, version, schema_id, spec, schema, partition_spec)
		VALUES ($1, $2, $3, $4, $5, $6)`, table, v.ID, v.Schema.ID, v.Spec, schema, ps); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE mink_tables SET version = $2, spec = $3 WHERE id = $1`, table, v.ID, v.Spec)
	return err
}

// Evolution computes a table's next version from its current one: the spec and fields of
// the new version, and whether it differs (false: nothing is stored). lastID is the
// highest field id any version has used; new fields must have ids above it.
type Evolution func(cur tableschema.Version, lastID int) (spec tableschema.Spec, fields []iceberg.NestedField, changed bool, err error)

// Evolve stores the version fn makes of the table's current one, holding the table's row
// so concurrent evolutions (indexers of two partitions, an AlterTable) apply one after
// the other, each to the version the one before made. When l is not nil the write is
// fenced by that lease. A new schema equal to an earlier version's shares its Iceberg
// schema id. It returns the current version afterwards.
func Evolve(ctx context.Context, db pg.DB, l *lease.Lease, table int64, fn Evolution) (tableschema.Version, error) {
	var out tableschema.Version
	run := func(tx pgx.Tx) error {
		var cur int
		// FOR NO KEY UPDATE: rows referencing the table (files being recorded) need not
		// wait for it.
		if err := tx.QueryRow(ctx, `SELECT version FROM mink_tables WHERE id = $1 FOR NO KEY UPDATE`, table).Scan(&cur); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return apierr.New(apierr.NotFound, "table %d does not exist", table)
			}
			return err
		}
		vs, err := Versions(ctx, tx, table)
		if err != nil {
			return err
		}
		if len(vs) == 1 && vs[0].ID == 0 {
			// A table from before versions were stored: store version 0 first, so that
			// what its files were built with stays known.
			if _, err := tx.Exec(ctx, `INSERT INTO mink_table_versions (table_id, version, schema_id, spec, schema)
				SELECT $1, 0, 0, spec, $2 FROM mink_tables WHERE id = $1 ON CONFLICT DO NOTHING`, table, mustJSON(vs[0].Schema)); err != nil {
				return err
			}
		}
		current := vs[len(vs)-1]
		for _, v := range vs {
			if v.ID == cur {
				current = v
			}
		}
		var schemas []*iceberg.Schema
		for _, v := range vs {
			schemas = append(schemas, v.Schema)
		}
		spec, fields, changed, err := fn(current, tableschema.HighestID(schemas...))
		if err != nil || !changed {
			out = current
			return err
		}
		next := tableschema.Version{ID: vs[len(vs)-1].ID + 1, Spec: spec}
		next.Schema = iceberg.NewSchema(0, fields...)
		maxSchema := 0
		reused := false
		for _, v := range vs {
			maxSchema = max(maxSchema, v.Schema.ID)
			if !reused && v.Schema.Equals(next.Schema) {
				next.Schema = iceberg.NewSchema(v.Schema.ID, fields...)
				reused = true
			}
		}
		if !reused {
			next.Schema = iceberg.NewSchema(maxSchema+1, fields...)
		}
		out = next
		// A schema change keeps the partition spec (field ids do not change meaning).
		var ps *partition.Spec
		if err := tx.QueryRow(ctx, `SELECT partition_spec FROM mink_table_versions WHERE table_id = $1 AND version = $2`,
			table, current.ID).Scan(&ps); err != nil {
			return err
		}
		return storeVersion(ctx, tx, table, next, ps)
	}
	var err error
	if l != nil {
		err = lease.Fenced(ctx, db, *l, run)
	} else {
		err = pgx.BeginFunc(ctx, db, run)
	}
	return out, err
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // an Iceberg schema always marshals
	}
	return b
}

// RegistrySchema is a Schema Registry schema as a table stores it, the first time one of
// its records uses it.
type RegistrySchema struct {
	ID      int  // the registry's global id
	Found   bool // false: the registry said it has no such id; records naming it are error rows
	Subject string
	Version int
	Type    string // AVRO, PROTOBUF or JSON
	Source  schemafmt.Source
}

// SaveRegistrySchema stores s for the table unless the table has that id already, and
// returns what the table has: the first stored wins, so every process decodes an id the
// same way forever. (Only a subject and version learned later are added to a schema
// first fetched by id: they name it, they do not change how it decodes.)
func SaveRegistrySchema(ctx context.Context, db pg.DB, table int64, s RegistrySchema) (RegistrySchema, error) {
	var src any
	if s.Found {
		src = s.Source
	}
	if _, err := db.Exec(ctx, `INSERT INTO mink_registry_schemas (table_id, schema_id, found, subject, version, type, source)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (table_id, schema_id) DO UPDATE SET subject = EXCLUDED.subject, version = EXCLUDED.version
		  WHERE mink_registry_schemas.subject = '' AND EXCLUDED.subject <> ''`,
		table, s.ID, s.Found, s.Subject, s.Version, s.Type, src); err != nil {
		return RegistrySchema{}, err
	}
	got, ok, err := GetRegistrySchema(ctx, db, table, s.ID)
	if err == nil && !ok {
		err = apierr.New(apierr.NotFound, "table %d does not exist", table) // dropped meanwhile
	}
	return got, err
}

const registryColumns = `schema_id, found, subject, version, type, source`

func scanRegistrySchema(row pgx.Row) (RegistrySchema, error) {
	var s RegistrySchema
	var src []byte
	if err := row.Scan(&s.ID, &s.Found, &s.Subject, &s.Version, &s.Type, &src); err != nil {
		return s, err
	}
	if len(src) > 0 {
		if err := json.Unmarshal(src, &s.Source); err != nil {
			return s, fmt.Errorf("stored registry schema %d: %w", s.ID, err)
		}
	}
	return s, nil
}

// GetRegistrySchema returns the table's stored registry schema with that id, if any.
func GetRegistrySchema(ctx context.Context, db pg.DB, table int64, id int) (RegistrySchema, bool, error) {
	s, err := scanRegistrySchema(db.QueryRow(ctx, `SELECT `+registryColumns+` FROM mink_registry_schemas
		WHERE table_id = $1 AND schema_id = $2`, table, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return RegistrySchema{}, false, nil
	}
	return s, err == nil, err
}

// RegistrySchemas returns every registry schema the table has stored, by id.
func RegistrySchemas(ctx context.Context, db pg.DB, table int64) ([]RegistrySchema, error) {
	rows, err := db.Query(ctx, `SELECT `+registryColumns+` FROM mink_registry_schemas
		WHERE table_id = $1 ORDER BY schema_id`, table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (RegistrySchema, error) { return scanRegistrySchema(r) })
}

// LatestRegistrySchema returns the stored schema of subject with the highest version:
// what the table knows as the subject's latest, without asking the registry.
func LatestRegistrySchema(ctx context.Context, db pg.DB, table int64, subject string) (RegistrySchema, bool, error) {
	s, err := scanRegistrySchema(db.QueryRow(ctx, `SELECT `+registryColumns+` FROM mink_registry_schemas
		WHERE table_id = $1 AND subject = $2 AND found ORDER BY version DESC, schema_id DESC LIMIT 1`, table, subject))
	if errors.Is(err, pgx.ErrNoRows) {
		return RegistrySchema{}, false, nil
	}
	return s, err == nil, err
}
