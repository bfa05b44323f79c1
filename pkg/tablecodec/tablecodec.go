// Package tablecodec makes the row decoders of a table's files: the table's schema version
// the file was built with, the registry schemas its records name (stored in Postgres the
// first time a record used them, so a rebuild never needs the registry), and the format
// decoders of pkg/schemafmt, composed with the Kafka columns of pkg/rowcodec.
//
// Indexing learns what it meets: a record naming a registry schema the table has not
// stored makes Check answer NeedSchema, and Learn fetches and stores it; a schema with
// fields the version lacks makes it answer NeedVersion, and Evolve stores the next
// version (a schema update the writer then commits). Rebuilds and live tails never ask
// the registry.
package tablecodec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/jsoninfer"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/schemafmt"
	"github.com/minkhq/mink/pkg/schemafmt/avrofmt"
	"github.com/minkhq/mink/pkg/schemafmt/jsonfmt"
	"github.com/minkhq/mink/pkg/schemafmt/protofmt"
	"github.com/minkhq/mink/pkg/schemapoints"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// ErrUnknownSchema: a record names a registry schema the table has not stored, and the
// caller may not ask the registry (a live tail, a rebuild).
var ErrUnknownSchema = errors.New("tablecodec: the record's schema is not known yet")

// Codecs builds decoders for any table. Versions and registry schemas never change once
// stored, so it caches them for the life of the process. Safe for concurrent use.
type Codecs struct {
	db  pg.DB
	reg *registry.Client // nil: no registry configured

	mu       sync.Mutex
	versions map[versionKey]tableschema.Version
	schemas  map[schemaKey]*writerSchema
	latest   map[string]latestEntry // by subject: the registry's latest, briefly
	// schemaLists are Schemas' answers by table and current version.
	schemaLists map[versionKey]schemaList
}

type versionKey struct {
	table   int64
	version int
}

// schemaKey names a compiled registry schema: the same id compiles differently for the
// value and the key (their Protobuf messages may differ).
type schemaKey struct {
	table int64
	id    int
	key   bool
}

type latestEntry struct {
	at time.Time
	s  registry.Schema
}

// latestFresh is how long the registry's latest version of a subject is trusted: a
// latest-mode range starts with at most this stale a view.
const latestFresh = 2 * time.Second

// New returns Codecs over the cluster's database and its registry (nil: none).
func New(db pg.DB, reg *registry.Client) *Codecs {
	return &Codecs{db: db, reg: reg, versions: map[versionKey]tableschema.Version{},
		schemas: map[schemaKey]*writerSchema{}, latest: map[string]latestEntry{}, schemaLists: map[versionKey]schemaList{}}
}

// Registry is the registry the codecs learn from; nil when none is configured.
func (c *Codecs) Registry() *registry.Client { return c.reg }

// Version returns a version of table t's schema.
func (c *Codecs) Version(ctx context.Context, t tables.Table, version int) (tableschema.Version, error) {
	k := versionKey{t.ID, version}
	c.mu.Lock()
	v, ok := c.versions[k]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := tables.GetVersion(ctx, c.db, t.ID, version)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	c.versions[k] = v
	c.mu.Unlock()
	return v, nil
}

// Schemas returns the Iceberg schemas of t's versions up to its current one, each once,
// in order, and the current version's: what table metadata must hold. Cached: versions
// never change once stored.
func (c *Codecs) Schemas(ctx context.Context, t tables.Table) (current *iceberg.Schema, all []*iceberg.Schema, err error) {
	k := versionKey{t.ID, t.Version}
	c.mu.Lock()
	e, ok := c.schemaLists[k]
	c.mu.Unlock()
	if ok {
		return e.current, e.all, nil
	}
	vs, err := tables.Versions(ctx, c.db, t.ID)
	if err != nil {
		return nil, nil, err
	}
	seen := map[int]bool{}
	for _, v := range vs {
		if v.ID > t.Version {
			break
		}
		if !seen[v.Schema.ID] {
			seen[v.Schema.ID] = true
			all = append(all, v.Schema)
		}
		if v.ID == t.Version {
			current = v.Schema
		}
	}
	if current == nil {
		return nil, nil, fmt.Errorf("table %s: schema version %d is not stored", t.FullName(), t.Version)
	}
	c.mu.Lock()
	c.schemaLists[k] = schemaList{current, all}
	c.mu.Unlock()
	return current, all, nil
}

type schemaList struct {
	current *iceberg.Schema
	all     []*iceberg.Schema
}

// writerSchema is one registry schema as a table reads it: compiled, or why not.
type writerSchema struct {
	id      int
	schema  schemafmt.Schema // nil when reason is set
	root    iceberg.Type
	indexes []int  // Protobuf: the message's index path, checked against each record's
	reason  string // why records naming it are error rows
}

// stored returns the compiled registry schema id of table t for the value or the key,
// from the cache or Postgres; ok is false when the table has not stored it.
func (c *Codecs) stored(ctx context.Context, t tables.Table, id int, key bool) (*writerSchema, bool, error) {
	k := schemaKey{t.ID, id, key}
	c.mu.Lock()
	w, ok := c.schemas[k]
	c.mu.Unlock()
	if ok {
		return w, true, nil
	}
	rs, ok, err := tables.GetRegistrySchema(ctx, c.db, t.ID, id)
	if err != nil || !ok {
		return nil, false, err
	}
	return c.compiled(t, rs, key), true, nil
}

// cached returns the compiled schema if this process has it, with no I/O.
func (c *Codecs) cached(t tables.Table, id int, key bool) *writerSchema {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.schemas[schemaKey{t.ID, id, key}]
}

// compiled compiles a stored registry schema for t's value or key and caches it.
func (c *Codecs) compiled(t tables.Table, rs tables.RegistrySchema, key bool) *writerSchema {
	dec := t.Spec.Value
	if key {
		dec = t.Spec.Key
	}
	w := &writerSchema{id: rs.ID}
	switch {
	case dec == nil:
		w.reason = "the table decodes no registry schema here" // a caller's bug
	case !rs.Found:
		w.reason = fmt.Sprintf("schema id %d is not in the schema registry", rs.ID)
	case formatOf(registry.Type(rs.Type)) != dec.Format:
		w.reason = fmt.Sprintf("schema id %d is a %s schema, the table reads %s", rs.ID, rs.Type, dec.Format)
	default:
		s, indexes, err := compile(dec, rs.Source)
		if err != nil {
			w.reason = fmt.Sprintf("schema id %d cannot be read: %v", rs.ID, err)
		} else {
			w.schema, w.root, w.indexes = s, s.Root(), indexes
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.schemas[schemaKey{t.ID, rs.ID, key}]; ok {
		return old
	}
	c.schemas[schemaKey{t.ID, rs.ID, key}] = w
	return w
}

// formatOf is the table format of a registry schema type.
func formatOf(t registry.Type) tableschema.Format {
	switch t {
	case registry.Protobuf:
		return tableschema.FormatProtobuf
	case registry.JSON:
		return tableschema.FormatJSONSchema
	}
	return tableschema.FormatAvro
}

// compile compiles a registry schema's source for a decoding.
func compile(dec *tableschema.Decoding, src schemafmt.Source) (schemafmt.Schema, []int, error) {
	switch dec.Format {
	case tableschema.FormatAvro:
		s, err := avrofmt.Compile(src)
		return s, nil, err
	case tableschema.FormatProtobuf:
		s, err := protofmt.Compile(src, dec.Message)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Indexes(), nil
	case tableschema.FormatJSONSchema:
		s, err := jsonfmt.Compile(src)
		return s, nil, err
	}
	return nil, nil, fmt.Errorf("format %s has no registry schemas", dec.Format)
}

// Learn makes table t know registry schema id: from Postgres if another process stored
// it, else from the registry, storing what the registry says (the schema, or that it has
// no such id) for every later use. It fails with an Unavailable error when the registry
// cannot answer, and ErrUnknownSchema when no registry is configured.
func (c *Codecs) Learn(ctx context.Context, t tables.Table, id int, key bool) error {
	if _, ok, err := c.stored(ctx, t, id, key); ok || err != nil {
		return err
	}
	if c.reg == nil {
		return fmt.Errorf("%w: schema id %d (no schema registry is configured: --schema-registry-url)", ErrUnknownSchema, id)
	}
	s, err := c.reg.ByID(ctx, id)
	rs := tables.RegistrySchema{ID: id}
	switch {
	case err == nil:
		rs = tables.RegistrySchema{ID: id, Found: true, Subject: s.Subject, Version: s.Version, Type: string(s.Type), Source: s.Source}
	case errors.Is(err, registry.ErrNotFound):
		// Stored as missing: every rebuild must decode these records as this one did.
	default:
		return err
	}
	stored, err := tables.SaveRegistrySchema(ctx, c.db, t.ID, rs)
	if err != nil {
		return err
	}
	c.compiled(t, stored, key)
	return nil
}

// Latest returns the id of subject's latest version in the registry (asked at most every
// latestFresh), stored for table t as schemas are the first time they are used.
func (c *Codecs) Latest(ctx context.Context, t tables.Table, subject string, key bool) (int, error) {
	if c.reg == nil {
		return 0, apierr.New(apierr.FailedPrecondition, "table %s reads subject %q in latest mode, but no schema registry is configured (--schema-registry-url)", t.FullName(), subject)
	}
	c.mu.Lock()
	e, ok := c.latest[subject]
	c.mu.Unlock()
	if !ok || time.Since(e.at) > latestFresh {
		s, err := c.reg.Latest(ctx, subject)
		if err != nil {
			return 0, err
		}
		e = latestEntry{at: time.Now(), s: s}
		c.mu.Lock()
		c.latest[subject] = e
		c.mu.Unlock()
	}
	if c.cached(t, e.s.ID, key) == nil {
		stored, err := tables.SaveRegistrySchema(ctx, c.db, t.ID, tables.RegistrySchema{ID: e.s.ID, Found: true,
			Subject: e.s.Subject, Version: e.s.Version, Type: string(e.s.Type), Source: e.s.Source})
		if err != nil {
			return 0, err
		}
		c.compiled(t, stored, key)
	}
	return e.s.ID, nil
}

// Evolve stores the next version of t's schema with registry schema id (learned already)
// merged in, for the value or the key, fenced by lease l (nil: unfenced), and returns
// the table's current version afterwards. Nothing changes when the current version
// covers the schema already.
func (c *Codecs) Evolve(ctx context.Context, l *lease.Lease, t tables.Table, id int, key bool) (tableschema.Version, error) {
	w, ok, err := c.stored(ctx, t, id, key)
	if err != nil {
		return tableschema.Version{}, err
	}
	if !ok {
		return tableschema.Version{}, fmt.Errorf("%w: schema id %d", ErrUnknownSchema, id)
	}
	v, err := tables.Evolve(ctx, c.db, l, t.ID, func(cur tableschema.Version, lastID int) (tableschema.Spec, []iceberg.NestedField, bool, error) {
		if w.root == nil {
			return cur.Spec, nil, false, nil // error rows: nothing to evolve to
		}
		var value, keyRoot iceberg.Type = w.root, nil
		if key {
			value, keyRoot = nil, w.root
		}
		fields, changed, _ := cur.Evolve(value, keyRoot, lastID)
		return cur.Spec, fields, changed, nil
	})
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	c.versions[versionKey{t.ID, v.ID}] = v
	c.mu.Unlock()
	return v, nil
}

// Infer stores the next version of inferred table t with the fields of JSON record
// value that its current version lacks (jsoninfer.Grow; new top-level columns say since
// where the data showed them), fenced by lease l (nil: unfenced), and returns the
// table's current version afterwards. Nothing changes when the current version has them
// all, or when the table made tableschema.InferMaxVersionsPerHour versions in the last
// hour (a topic whose keys are data must not make versions without end).
func (c *Codecs) Infer(ctx context.Context, l *lease.Lease, t tables.Table, value []byte, since string) (tableschema.Version, error) {
	recent, err := tables.VersionsSince(ctx, c.db, t.ID, time.Hour)
	if err != nil {
		return tableschema.Version{}, err
	}
	v, err := tables.Evolve(ctx, c.db, l, t.ID, func(cur tableschema.Version, lastID int) (tableschema.Spec, []iceberg.NestedField, bool, error) {
		if cur.Spec.Infer == nil || recent >= tableschema.InferMaxVersionsPerHour {
			return cur.Spec, nil, false, nil
		}
		fields := cur.Schema.Fields()
		cols, _ := tableschema.InferredColumns(fields)
		var columns, rest []iceberg.NestedField
		for i, f := range fields {
			if slices.Contains(cols, i) {
				columns = append(columns, f)
			} else {
				rest = append(rest, f)
			}
		}
		spec := cur.Spec
		spec.Infer = cur.Spec.Infer.Clone()
		next := lastID
		grown, changed := jsoninfer.Grow(columns, spec.Infer, value, func() int { next++; return next }, since)
		if !changed {
			return cur.Spec, nil, false, nil
		}
		return spec, slices.Concat(grown, rest), true, nil
	})
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	c.versions[versionKey{t.ID, v.ID}] = v
	c.mu.Unlock()
	return v, nil
}

// NewSettings returns the recipe of a new file of table t: the default Parquet settings,
// the given version, and for latest-mode decodings the registry ids to decode with.
func NewSettings(version, valueID, keyID int) parquetbuild.Settings {
	s := parquetbuild.DefaultSettings()
	s.TableVersion, s.ValueSchemaID, s.KeySchemaID = version, valueID, keyID
	return s
}

// SettingsOf returns the recipe of a new file whose records decode with d.
func SettingsOf(d schemapoints.Decoding) parquetbuild.Settings {
	return NewSettings(d.Version, d.ValueSchemaID, d.KeySchemaID)
}

// Current returns table t's current decoding, decided without the registry: its current
// version and, in latest mode, the newest version of each subject it has stored (what
// indexing last used). A partition's first schema point has it (Points).
func (c *Codecs) Current(ctx context.Context, t tables.Table) (schemapoints.Decoding, error) {
	d := schemapoints.Decoding{Version: t.Version}
	for i, dec := range []*tableschema.Decoding{t.Spec.Value, t.Spec.Key} {
		if dec == nil || dec.Mode != tableschema.ModeLatest {
			continue
		}
		rs, ok, err := tables.LatestRegistrySchema(ctx, c.db, t.ID, dec.Subject)
		if err != nil {
			return d, err
		}
		if !ok {
			return d, fmt.Errorf("%w: no version of subject %q is stored yet", ErrUnknownSchema, dec.Subject)
		}
		if i == 0 {
			d.ValueSchemaID = rs.ID
		} else {
			d.KeySchemaID = rs.ID
		}
	}
	return d, nil
}

// Points returns the schema points of partition p of table t: the decoding every build
// of a record uses is the one in force at its offset. A partition without any gets its
// first, at offset 0 with t's current decoding, from whichever build asks first.
func (c *Codecs) Points(ctx context.Context, t tables.Table, p int32) (schemapoints.Points, error) {
	ps, err := ranges.Points(ctx, c.db, t.ID, p)
	if err != nil || len(ps) > 0 {
		return ps, err
	}
	first, err := c.Current(ctx, t)
	if err != nil {
		return nil, err
	}
	return ranges.EnsurePoints(ctx, c.db, t.ID, p, first)
}

// FirstVersion fetches the latest schemas of spec's value and key subjects from the
// registry and returns the spec with its defaults resolved (a Protobuf message picked by
// default is named), the fields of the table's first version, and the registry schemas
// they came from (to store with the table). Errors name the subject: NotFound when the
// registry lacks it, Unavailable when the registry cannot be reached, InvalidArgument
// when its schema cannot be a table (a recursive type, a reserved column name).
func (c *Codecs) FirstVersion(ctx context.Context, spec tableschema.Spec) (tableschema.Spec, []iceberg.NestedField, []tables.RegistrySchema, error) {
	var roots [2]iceberg.Type
	var stored []tables.RegistrySchema
	for i, p := range []struct {
		dec                           **tableschema.Decoding
		formatField, subject, message string
	}{{&spec.Value, "format", "value_subject", "message"}, {&spec.Key, "key_format", "key_subject", "key_message"}} {
		if *p.dec == nil {
			continue
		}
		d := **p.dec
		if c.reg == nil {
			return spec, nil, nil, apierr.New(apierr.FailedPrecondition,
				"format %s needs a schema registry, and this node has none configured (--schema-registry-url, MINK_SCHEMA_REGISTRY_URL)", d.Format)
		}
		s, err := c.reg.Latest(ctx, d.Subject)
		if err != nil {
			return spec, nil, nil, err
		}
		if f := formatOf(s.Type); f != d.Format {
			return spec, nil, nil, apierr.Invalid(p.formatField, "subject %q holds %s schemas, not %s", d.Subject, s.Type, d.Format)
		}
		w, _, err := compile(&d, s.Source)
		if err != nil {
			field := p.subject
			if errors.Is(err, protofmt.ErrNoSuchMessage) {
				field = p.message
			}
			return spec, nil, nil, apierr.Invalid(field, "subject %q version %d (schema id %d): %v", d.Subject, s.Version, s.ID, err)
		}
		if ps, ok := w.(interface{ Message() string }); ok && d.Message == "" {
			d.Message = ps.Message()
		}
		*p.dec = &d
		roots[i] = w.Root()
		stored = append(stored, tables.RegistrySchema{ID: s.ID, Found: true, Subject: s.Subject, Version: s.Version, Type: string(s.Type), Source: s.Source})
	}
	fields, err := tableschema.Compose(spec, roots[0], roots[1])
	if err != nil {
		field := "value_subject"
		if roots[0] == nil {
			field = "key_subject"
		}
		return spec, nil, nil, apierr.Invalid(field, "%v", err)
	}
	return spec, fields, stored, nil
}
