// Package icebergmeta turns Mink's data files (indexed ranges, assembled runs, rebuilt
// tails) into Apache Iceberg v2 table metadata: manifests, manifest lists and metadata
// JSON, written with iceberg-go's own writers so every engine reads them as it reads any
// Iceberg table. It is pure but for reading earlier metadata files through a Store:
// files in, files out; storing them and making a version current is the writer's job.
//
// Design notes: docs/design/icebergmeta.md.
package icebergmeta

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/tableschema"
)

// FormatVersion is the Iceberg table format version Mink writes.
const FormatVersion = 2

// Table is what a table's metadata is made of besides its files.
type Table struct {
	Namespace, Name string
	// Schema is the current schema (the table's current schema version's, with stable
	// field ids); Schemas are every schema of the table's versions, Schema among them
	// (nil: only Schema). A commit adds those the metadata lacks and makes Schema
	// current: the schema updates of Iceberg schema evolution.
	Schema     *iceberg.Schema
	Schemas    []*iceberg.Schema
	Properties map[string]string // served as Iceberg table properties
	// Specs are every partition spec of the table (tables.PartitionSpecs), SpecID the
	// current one's id (default-spec-id), the spec new files are written with. nil: the
	// default, identity(_kafka_partition) (spec 0) over Schema.
	Specs  []partition.Spec
	SpecID int
}

// partitioning is t's specs (the default when it names none) and the current one.
func (t Table) partitioning(schema *iceberg.Schema) ([]partition.Spec, partition.Spec, error) {
	specs := t.Specs
	if len(specs) == 0 {
		def, err := partition.KafkaPartitionSpec(schema)
		if err != nil {
			return nil, partition.Spec{}, fmt.Errorf("icebergmeta: partition spec: %w", err)
		}
		specs = []partition.Spec{def}
	}
	i := slices.IndexFunc(specs, func(s partition.Spec) bool { return s.ID == t.SpecID })
	if i < 0 {
		return nil, partition.Spec{}, fmt.Errorf("icebergmeta: table %s.%s has no partition spec %d", t.Namespace, t.Name, t.SpecID)
	}
	return specs, specs[i], nil
}

// syncSpecs adds t's partition specs that md lacks (nil md: a new table's), in id
// order, and makes t.SpecID the default: partition evolution's updates. Each is added
// as iceberg-go binds it to schema, which must keep its id.
func syncSpecs(b *table.MetadataBuilder, md table.Metadata, t Table, schema *iceberg.Schema) error {
	specs, cur, err := t.partitioning(schema)
	if err != nil {
		return err
	}
	specs = slices.SortedFunc(slices.Values(specs), func(a, b partition.Spec) int { return a.ID - b.ID })
	for _, s := range specs {
		is, err := s.Iceberg(schema)
		if err != nil {
			return fmt.Errorf("icebergmeta: partition spec %d: %w", s.ID, err)
		}
		if md != nil {
			// Files name their spec by id: one id with two meanings would misread them.
			if have := md.PartitionSpecByID(s.ID); have != nil {
				if !have.Equals(is) {
					return fmt.Errorf("icebergmeta: the metadata's partition spec %d is %v, the table's %v", s.ID, *have, is)
				}
				continue
			}
		}
		if err := b.AddPartitionSpec(&is, md == nil && s.ID == specs[0].ID); err != nil {
			return fmt.Errorf("icebergmeta: add partition spec %d: %w", s.ID, err)
		}
		if got, err := b.GetSpecByID(s.ID); err != nil || !got.Equals(is) {
			return fmt.Errorf("icebergmeta: partition spec %d was not added as given", s.ID)
		}
	}
	if md == nil || md.DefaultPartitionSpec() != cur.ID {
		if err := b.SetDefaultSpecID(cur.ID); err != nil {
			return fmt.Errorf("icebergmeta: set default partition spec %d: %w", cur.ID, err)
		}
	}
	return nil
}

// syncSchemas adds t's schemas that md lacks, in order, and makes t.Schema current.
func syncSchemas(b *table.MetadataBuilder, md table.Metadata, t Table) error {
	if t.Schema == nil {
		return nil
	}
	all := t.Schemas
	if len(all) == 0 {
		all = []*iceberg.Schema{t.Schema}
	}
	have := map[int]bool{}
	for _, s := range md.Schemas() {
		have[s.ID] = true
	}
	for _, s := range all {
		if have[s.ID] {
			continue
		}
		// The builder may renumber what it is given; ours come numbered as Postgres
		// stores them, so hand it a copy and check the number held.
		c := iceberg.NewSchema(s.ID, s.Fields()...)
		if err := b.AddSchema(c); err != nil {
			return fmt.Errorf("icebergmeta: add schema %d: %w", s.ID, err)
		}
		if c.ID != s.ID {
			return fmt.Errorf("icebergmeta: schema %d was added as %d", s.ID, c.ID)
		}
		have[s.ID] = true
	}
	if md.CurrentSchema().ID != t.Schema.ID {
		if err := b.SetCurrentSchemaID(t.Schema.ID); err != nil {
			return fmt.Errorf("icebergmeta: set current schema %d: %w", t.Schema.ID, err)
		}
	}
	return nil
}

// currentSchema is the schema new snapshots are written with: t's when it names one.
func currentSchema(t Table, md table.Metadata) *iceberg.Schema {
	if t.Schema != nil {
		return t.Schema
	}
	return md.CurrentSchema()
}

// Location is the table's Iceberg location.
func (t Table) Location() string { return layout.Location(t.Namespace, t.Name) }

// DataFile is one data file as Mink records it (a mink_data_files row): enough to name
// it in a manifest and to rebuild it byte for byte from Kafka.
type DataFile struct {
	Key        string // key in the bucket (layout.DataKey)
	Partition  int32
	Start, End int64 // Kafka offsets [Start, End)
	Records    int64
	Size       int64
	SHA256     string
	Settings   json.RawMessage // parquetbuild.Settings
	Stats      json.RawMessage // []parquetbuild.ColumnStats
	// DeletesOf is, for a position delete file of an upsert table, the key of the data
	// file whose rows it deletes (Partition, Start and End are that file's): those whose
	// key a record of the partition in [End, CoverEnd) touches. Empty for a data file.
	DeletesOf string
	CoverEnd  int64
}

// IsDeletes reports whether f is a position delete file.
func (f DataFile) IsDeletes() bool { return f.DeletesOf != "" }

// URI is the file's path in manifests.
func (f DataFile) URI() string { return layout.URI(f.Key) }

// File is a metadata file to store.
type File struct {
	Key     string
	Content []byte
}

// Coverage is the offsets of one partition a snapshot covers: every committed record of
// [Start, End) is exactly one row of the snapshot.
type Coverage struct{ Start, End int64 }

// Summary keys Mink adds to snapshot summaries.
const (
	summaryPartitionPrefix = "mink.partition."
	summaryStartSuffix     = ".start-offset"
	summaryEndSuffix       = ".end-offset"
)

// CoverageKeys are the summary keys of one partition's coverage.
func CoverageKeys(p int32) (start, end string) {
	s := summaryPartitionPrefix + strconv.FormatInt(int64(p), 10)
	return s + summaryStartSuffix, s + summaryEndSuffix
}

// ParseCoverage reads the per-partition coverage from a snapshot summary; nil summary
// (no snapshot yet) covers nothing.
func ParseCoverage(s *table.Summary) (map[int32]Coverage, error) {
	out := map[int32]Coverage{}
	if s == nil {
		return out, nil
	}
	for k, v := range s.Properties {
		rest, ok := strings.CutPrefix(k, summaryPartitionPrefix)
		if !ok {
			continue
		}
		ps, which, ok := strings.Cut(rest, ".")
		if !ok {
			continue
		}
		p, err1 := strconv.ParseInt(ps, 10, 32)
		off, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("icebergmeta: bad coverage %s=%q in snapshot summary", k, v)
		}
		c := out[int32(p)]
		switch "." + which {
		case summaryStartSuffix:
			c.Start = off
		case summaryEndSuffix:
			c.End = off
		default:
			continue
		}
		out[int32(p)] = c
	}
	for p, c := range out {
		if c.Start > c.End {
			return nil, fmt.Errorf("icebergmeta: partition %d coverage [%d, %d) is inverted", p, c.Start, c.End)
		}
	}
	return out, nil
}

func coverageProps(cov map[int32]Coverage, props iceberg.Properties) {
	for p, c := range cov {
		ks, ke := CoverageKeys(p)
		props[ks] = strconv.FormatInt(c.Start, 10)
		props[ke] = strconv.FormatInt(c.End, 10)
	}
}

// writeSpec is the partition spec new files are written with: the table's current one.
type writeSpec struct {
	iceberg iceberg.PartitionSpec
	eval    *partition.Evaluator
	kafka   bool // identity(_kafka_partition): a file's tuple is its Kafka partition
}

func newWriteSpec(t Table, schema *iceberg.Schema) (writeSpec, error) {
	_, cur, err := t.partitioning(schema)
	if err != nil {
		return writeSpec{}, err
	}
	def, err := partition.KafkaPartitionSpec(schema)
	if err != nil {
		return writeSpec{}, fmt.Errorf("icebergmeta: partition spec: %w", err)
	}
	w := writeSpec{kafka: cur.Equal(def)}
	if w.iceberg, err = cur.Iceberg(schema); err != nil {
		return writeSpec{}, fmt.Errorf("icebergmeta: %w", err)
	}
	if w.eval, err = partition.NewEvaluator(cur, schema); err != nil {
		return writeSpec{}, fmt.Errorf("icebergmeta: %w", err)
	}
	return w, nil
}

// partitionValues are f's partition values under ws, by partition field id. A file
// holds one Kafka partition's records; under the default spec that partition is its
// tuple. (Files of other specs are to carry their tuple once ranges are indexed per
// tuple: docs/design/partition-specs.md.)
func (f DataFile) partitionValues(ws writeSpec) (map[int]any, error) {
	if !ws.kafka {
		return nil, fmt.Errorf("icebergmeta: data file %s: no partition tuple for spec %d (only identity(%s) is indexed)",
			f.Key, ws.iceberg.ID(), tableschema.ColumnKafkaPartition)
	}
	return ws.eval.Literals(partition.Tuple{{Valid: true, Int: int64(f.Partition)}}), nil
}

// icebergFile describes f in a manifest: path, exact size, row count, partition values
// under ws and the column statistics measured when the file was built.
func (f DataFile) icebergFile(ws writeSpec) (iceberg.DataFile, error) {
	content := iceberg.EntryContentData
	if f.IsDeletes() {
		content = iceberg.EntryContentPosDeletes
	}
	values, err := f.partitionValues(ws)
	if err != nil {
		return nil, err
	}
	b, err := iceberg.NewDataFileBuilder(ws.iceberg, content, f.URI(), iceberg.ParquetFile,
		values, nil, nil, f.Records, f.Size)
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: data file %s: %w", f.Key, err)
	}
	if f.IsDeletes() {
		// File-scoped: engines apply it to that one file (v2 readers by its file_path
		// bounds, which the statistics carry; v3 ones by referenced_data_file).
		b.ReferencedDataFile(layout.URI(f.DeletesOf))
	}
	var cols []parquetbuild.ColumnStats
	if len(f.Stats) > 0 {
		if err := json.Unmarshal(f.Stats, &cols); err != nil {
			return nil, fmt.Errorf("icebergmeta: data file %s: bad column statistics: %w", f.Key, err)
		}
	}
	if len(cols) > 0 {
		sizes, values, nulls := map[int]int64{}, map[int]int64{}, map[int]int64{}
		lower, upper := map[int][]byte{}, map[int][]byte{}
		for _, c := range cols {
			sizes[c.FieldID] = c.ColumnSize
			values[c.FieldID] = c.ValueCount
			nulls[c.FieldID] = c.NullCount
			if c.LowerBound != nil {
				lower[c.FieldID] = c.LowerBound
			}
			if c.UpperBound != nil {
				upper[c.FieldID] = c.UpperBound
			}
		}
		b.ColumnSizes(sizes).ValueCounts(values).NullValueCounts(nulls)
		if len(lower) > 0 {
			b.LowerBoundValues(lower)
		}
		if len(upper) > 0 {
			b.UpperBoundValues(upper)
		}
	}
	return b.Build(), nil
}

// DefaultProperties are served for a table that does not set them: what Mink does
// anyway, said in Iceberg's terms. Older metadata JSON leaves the metadata log after 10
// versions and is then collected (Mink commits every few seconds; Iceberg's default of
// 100 would keep megabytes of history per table).
var DefaultProperties = map[string]string{
	table.MetadataPreviousVersionsMaxKey:      "10",
	table.MetadataDeleteAfterCommitEnabledKey: "true",
	table.MaxSnapshotAgeMsKey:                 strconv.FormatInt(DefaultMaxSnapshotAge.Milliseconds(), 10),
	table.MinSnapshotsToKeepKey:               strconv.Itoa(DefaultMinSnapshots),
	table.ManifestMergeEnabledKey:             "true",
}

// PropertiesOf are the Iceberg properties the metadata of t carries once committed.
func PropertiesOf(t Table) map[string]string { return tableProperties(t) }

// tableProperties are the Iceberg properties served for t: its own, less the ones
// Iceberg reserves for itself, over DefaultProperties.
func tableProperties(t Table) iceberg.Properties {
	props := cloneProps(DefaultProperties)
	for k, v := range t.Properties {
		if !slices.Contains(table.ReservedProperties[:], k) {
			props[k] = v
		}
	}
	return props
}

// Names of the metadata files this package writes; IsWriterKey recognises them.
var writerNames = regexp.MustCompile(`^(\d{5,}-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\.metadata\.json` +
	`|snap-\d+-\d+-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\.avro` +
	`|[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}-m\d+\.avro)$`)

// IsWriterKey reports whether key names a metadata file of table ns.name written by
// this package's Create and Commit. Collection deletes those once no live snapshot names
// them; a live load's metadata files (Live: IsLiveKey) are not in the writer's chain and
// go when they expire instead.
func IsWriterKey(ns, name, key string) bool {
	rest, ok := strings.CutPrefix(key, layout.MetadataKey(ns, name, ""))
	return ok && writerNames.MatchString(rest)
}

func metadataName(version int64, id string) string {
	return fmt.Sprintf("%05d-%s.metadata.json", version, id)
}
func manifestListName(snapshot int64, id string) string {
	return fmt.Sprintf("snap-%d-1-%s.avro", snapshot, id)
}
func manifestName(id string, n int) string { return fmt.Sprintf("%s-m%d.avro", id, n) }

// cloneProps copies a property map, nil as empty.
func cloneProps(m map[string]string) iceberg.Properties {
	out := iceberg.Properties{}
	maps.Copy(out, m)
	return out
}
