package icebergmeta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/tables"
)

var (
	// ErrNoChange: the change would leave the metadata as it is; nothing to commit.
	ErrNoChange = errors.New("icebergmeta: nothing to commit")
	// ErrNotLive: a file to remove is not a data file of the current snapshot.
	ErrNotLive = errors.New("icebergmeta: file is not in the current snapshot")
)

// Base is the metadata a change applies to: a table's current version.
type Base struct {
	Version  int64 // version of the commit pointer that names Key
	Key      string
	Metadata table.Metadata
}

// Result is a new metadata version: the files to store and the metadata they make.
type Result struct {
	Version  int64 // Base.Version + 1
	Key      string
	Metadata table.Metadata
	// Files are every new metadata file: manifests, the manifest list, and last the
	// metadata JSON at Key. None may be named by anything before they are stored.
	Files    []File
	Snapshot *table.Snapshot // the new current snapshot; nil when the change made none
	Expired  []int64         // snapshots removed from the metadata
}

// Create returns the first metadata of a table: its schema, the identity spec on
// _kafka_partition, its location and properties, a fresh table UUID, and no snapshot,
// so the table loads (empty) before anything is committed.
func Create(t Table) (*Result, error) {
	b, err := table.NewMetadataBuilder(FormatVersion)
	if err != nil {
		return nil, err
	}
	order := table.UnsortedSortOrder
	steps := []func() error{
		func() error { return b.SetUUID(uuid.New()) },
		func() error { return addSchemas(b, t) },
		func() error { return b.AddSortOrder(&order) },
		func() error { return b.SetDefaultSortOrderID(-1) },
		func() error { return syncSpecs(b, nil, t, t.Schema) },
		func() error { return b.SetLoc(t.Location()) },
		func() error { return b.SetProperties(tableProperties(t)) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("icebergmeta: create metadata of %s.%s: %w", t.Namespace, t.Name, err)
		}
	}
	return finish(t, b, 1, &Result{})
}

// addSchemas adds every schema of t to a new table's metadata and makes t.Schema current.
func addSchemas(b *table.MetadataBuilder, t Table) error {
	all := t.Schemas
	if len(all) == 0 {
		all = []*iceberg.Schema{t.Schema}
	}
	for _, s := range all {
		c := iceberg.NewSchema(s.ID, s.Fields()...)
		if err := b.AddSchema(c); err != nil {
			return err
		}
		if c.ID != s.ID {
			return fmt.Errorf("schema %d was added as %d", s.ID, c.ID)
		}
	}
	return b.SetCurrentSchemaID(t.Schema.ID)
}

// Change is what one commit does to a table.
type Change struct {
	// Operation of the new snapshot: table.OpAppend (new files), table.OpReplace (the
	// same rows in other files), table.OpDelete (files removed) or table.OpOverwrite
	// (both). Empty: no new snapshot, only expiry and properties.
	Operation table.Operation
	Add       []DataFile
	Remove    []DataFile // each must be a data file of the current snapshot (by Key)
	// AddDeletes and RemoveDeletes are position delete files (DataFile.IsDeletes) that
	// join and leave the snapshot (upsert tables); removed ones must be in it.
	AddDeletes, RemoveDeletes []DataFile
	// Coverage of the partitions whose coverage changed; the others keep the current
	// snapshot's.
	Coverage map[int32]Coverage
	Summary  map[string]string // more summary properties ("mink.*")
	// Now is the database's time: the snapshot's timestamp and the clock of expiry.
	Now time.Time
	// Expire are snapshots to expire whatever retention keeps: ones naming a file Kafka
	// no longer yields (compaction, retention), which no reader could read. The snapshot
	// that stays current is never expired (ids not in the metadata are ignored).
	Expire []int64
}

// Commit builds the metadata version that applies ch to base: a new snapshot whose
// manifest list carries the current snapshot's manifests over unchanged, except those
// naming removed files (rewritten with those entries deleted and the rest existing); a
// new manifest for the added files; small manifests merged once there are many
// (commit.manifest.*); snapshots past retention expired (history.expire.*); and t's
// properties. It reads earlier manifests through r and writes nothing: storing the
// files and making Key current is the caller's.
func Commit(ctx context.Context, r *Reader, t Table, base Base, ch Change) (*Result, error) {
	md := base.Metadata
	b, err := table.MetadataBuilderFromBase(md, layout.URI(base.Key))
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: %w", err)
	}
	res := &Result{}
	if err := syncSchemas(b, md, t); err != nil {
		return nil, err
	}
	if err := syncSpecs(b, md, t, currentSchema(t, md)); err != nil {
		return nil, err
	}
	var newID *int64
	if ch.Operation != "" {
		snap, files, err := newSnapshot(ctx, r, t, md, ch, snapshotOptions{})
		if err != nil {
			return nil, err
		}
		if err := b.AddSnapshot(snap); err != nil {
			return nil, fmt.Errorf("icebergmeta: add snapshot: %w", err)
		}
		if err := b.SetSnapshotRef(table.MainBranch, snap.SnapshotID, table.BranchRef); err != nil {
			return nil, fmt.Errorf("icebergmeta: set main: %w", err)
		}
		res.Snapshot, res.Files, newID = snap, files, &snap.SnapshotID
	}
	res.Expired = Expirable(md, newID, ch.Now, RetentionOf(t.Properties))
	for _, id := range ch.Expire {
		cur := md.CurrentSnapshot()
		if md.SnapshotByID(id) != nil && (newID != nil || cur == nil || id != cur.SnapshotID) && !slices.Contains(res.Expired, id) {
			res.Expired = append(res.Expired, id)
		}
	}
	slices.Sort(res.Expired)
	if len(res.Expired) > 0 {
		if err := b.RemoveSnapshots(res.Expired, false); err != nil {
			return nil, fmt.Errorf("icebergmeta: expire snapshots: %w", err)
		}
	}
	if err := syncProperties(b, md, t); err != nil {
		return nil, err
	}
	if !b.HasChanges() {
		return nil, ErrNoChange
	}
	return finish(t, b, base.Version+1, res)
}

// finish builds the metadata and its JSON file, named as the writer names versions.
func finish(t Table, b *table.MetadataBuilder, version int64, res *Result) (*Result, error) {
	return finishAs(t, b, version, res, metadataName(version, uuid.NewString()))
}

// finishAs builds the metadata and its JSON file, named name under metadata/.
func finishAs(t Table, b *table.MetadataBuilder, version int64, res *Result, name string) (*Result, error) {
	md, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: build metadata: %w", err)
	}
	content, err := json.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: encode metadata: %w", err)
	}
	res.Version = version
	res.Key = layout.MetadataKey(t.Namespace, t.Name, name)
	res.Metadata = md
	res.Files = append(res.Files, File{Key: res.Key, Content: content})
	return res, nil
}

func syncProperties(b *table.MetadataBuilder, md table.Metadata, t Table) error {
	want := tableProperties(t)
	have := md.Properties()
	set := iceberg.Properties{}
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			set[k] = v
		}
	}
	var drop []string
	for k := range have {
		if _, ok := want[k]; !ok {
			drop = append(drop, k)
		}
	}
	sort.Strings(drop)
	if err := b.SetProperties(set); err != nil {
		return fmt.Errorf("icebergmeta: properties: %w", err)
	}
	if err := b.RemoveProperties(drop); err != nil {
		return fmt.Errorf("icebergmeta: properties: %w", err)
	}
	return nil
}

// MaxSnapshotID is the largest snapshot id Mink picks: 2^53-1, the largest integer a
// JavaScript client's JSON.parse reads exactly (the spec allows any long, and
// 4205664986623586685 would read as 4205664986623587000 there). Tables keep the larger
// ids they were given before; nothing renumbers them.
const MaxSnapshotID = 1<<53 - 1

// newSnapshotID picks an unused snapshot id in [1, MaxSnapshotID]. Random, as Iceberg
// picks them: with 2^53 ids, a table keeping thousands of snapshots meets a taken one
// about once in a trillion picks, and picks again.
func newSnapshotID(md table.Metadata) int64 {
	for {
		id := rand.Int64N(MaxSnapshotID) + 1
		if md.SnapshotByID(id) == nil {
			return id
		}
	}
}

// snapshotOptions are how a snapshot's files are written: the writer's commits use the
// zero value; live loads name theirs under metadata/live/ and never merge manifests.
type snapshotOptions struct {
	dir     string // prefix of the file names under metadata/ ("live/")
	noMerge bool   // carry the parent's manifests as they are
}

// newSnapshot writes the new snapshot's manifests and manifest list.
func newSnapshot(ctx context.Context, r *Reader, t Table, md table.Metadata, ch Change, o snapshotOptions) (*table.Snapshot, []File, error) {
	schema := currentSchema(t, md)
	ws, err := newWriteSpec(t, schema)
	if err != nil {
		return nil, nil, err
	}
	parent := md.CurrentSnapshot()
	var parentID *int64
	if parent != nil {
		id := parent.SnapshotID
		parentID = &id
	}
	w := &manifests{
		t: t, spec: ws.iceberg, schema: schema, id: newSnapshotID(md), commit: uuid.NewString(),
		mergeMin:    propInt(t.Properties, table.ManifestMinMergeCountKey, table.ManifestMinMergeCountDefault),
		mergeTarget: propInt(t.Properties, table.ManifestTargetSizeBytesKey, table.ManifestTargetSizeBytesDefault),
		merge:       !o.noMerge && propBool(t.Properties, table.ManifestMergeEnabledKey, true),
		dir:         o.dir,
	}
	seq := md.LastSequenceNumber() + 1

	var list []iceberg.ManifestFile
	for _, add := range []struct {
		files   []DataFile
		content iceberg.ManifestContent
	}{{ch.Add, iceberg.ManifestContentData}, {ch.AddDeletes, iceberg.ManifestContentDeletes}} {
		if len(add.files) == 0 {
			continue
		}
		dfs := make([]iceberg.DataFile, 0, len(add.files))
		for _, f := range add.files {
			if f.IsDeletes() != (add.content == iceberg.ManifestContentDeletes) {
				return nil, nil, fmt.Errorf("icebergmeta: %s added as the wrong kind of file", f.Key)
			}
			df, err := f.icebergFile(ws)
			if err != nil {
				return nil, nil, err
			}
			dfs = append(dfs, df)
		}
		id := w.id
		mf, err := w.write(add.content, func(mw *iceberg.ManifestWriter) error {
			for _, df := range dfs {
				if err := mw.Add(iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &id, nil, nil, df)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		list = append(list, mf)
	}
	carried, all, err := w.carry(ctx, r, parent, append(slices.Clip(ch.Remove), ch.RemoveDeletes...))
	if err != nil {
		return nil, nil, err
	}
	list = append(list, carried...)

	var buf bytes.Buffer
	lw, err := iceberg.NewManifestListWriterV2(&buf, w.id, seq, parentID)
	if err != nil {
		return nil, nil, fmt.Errorf("icebergmeta: manifest list: %w", err)
	}
	if err := lw.AddManifests(list); err != nil {
		lw.Close()
		return nil, nil, fmt.Errorf("icebergmeta: manifest list: %w", err)
	}
	if err := lw.Close(); err != nil {
		return nil, nil, fmt.Errorf("icebergmeta: manifest list: %w", err)
	}
	listBytes, err := portableAvro(buf.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("icebergmeta: manifest list: %w", err)
	}
	listKey := layout.MetadataKey(t.Namespace, t.Name, o.dir+manifestListName(w.id, w.commit))
	files := append(w.files, File{Key: listKey, Content: listBytes})

	summary, err := summarize(parent, ch)
	if err != nil {
		return nil, nil, err
	}
	if parent != nil && all {
		summary.Properties[SummaryParentCarried] = "true"
	}
	schemaID := schema.ID
	snap := &table.Snapshot{
		SnapshotID:       w.id,
		ParentSnapshotID: parentID,
		SequenceNumber:   seq,
		// Never before the last update, so the snapshot log stays in order even if
		// clocks disagree.
		TimestampMs:  max(ch.Now.UnixMilli(), md.LastUpdatedMillis()),
		ManifestList: layout.URI(listKey),
		Summary:      summary,
		SchemaID:     &schemaID,
	}
	return snap, files, nil
}

// manifests writes the manifests of one new snapshot.
type manifests struct {
	t           Table
	spec        iceberg.PartitionSpec
	schema      *iceberg.Schema
	id          int64 // the new snapshot
	commit      string
	n           int
	files       []File
	merge       bool
	mergeMin    int
	mergeTarget int
	dir         string // see snapshotOptions
}

// write writes one manifest of content (data or deletes) that fill fills.
func (w *manifests) write(kind iceberg.ManifestContent, fill func(*iceberg.ManifestWriter) error) (iceberg.ManifestFile, error) {
	var buf bytes.Buffer
	mw, err := iceberg.NewManifestWriter(FormatVersion, &buf, w.spec, w.schema, w.id, iceberg.WithManifestWriterContent(kind))
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: manifest: %w", err)
	}
	if err := fill(mw); err != nil {
		mw.Close()
		return nil, fmt.Errorf("icebergmeta: manifest: %w", err)
	}
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("icebergmeta: manifest: %w", err)
	}
	content, err := portableAvro(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: manifest: %w", err)
	}
	key := layout.MetadataKey(w.t.Namespace, w.t.Name, w.dir+manifestName(w.commit, w.n))
	w.n++
	mf, err := mw.ToManifestFile(layout.URI(key), int64(len(content)))
	if err != nil {
		return nil, fmt.Errorf("icebergmeta: manifest: %w", err)
	}
	w.files = append(w.files, File{Key: key, Content: content})
	return mf, nil
}

// carry returns the parent's manifests for the new snapshot: unchanged when they name
// no removed file, rewritten when they do, dropped when they only record deletions of
// an earlier snapshot, and the small ones merged once there are many.
func (w *manifests) carry(ctx context.Context, r *Reader, parent *table.Snapshot, remove []DataFile) (_ []iceberg.ManifestFile, all bool, err error) {
	gone := make(map[string]bool, len(remove))
	for _, f := range remove {
		gone[f.URI()] = true
	}
	ms, err := r.ManifestList(ctx, parent)
	if err != nil {
		return nil, false, err
	}
	var out, kept []iceberg.ManifestFile
	found := 0
	for _, m := range ms {
		if m.AddedDataFiles()+m.ExistingDataFiles() == 0 {
			continue // only tombstones of an earlier snapshot's removals
		}
		hits := 0
		if len(gone) > 0 {
			paths, err := r.LivePaths(ctx, m)
			if err != nil {
				return nil, false, err
			}
			for _, p := range paths {
				if gone[p] {
					hits++
				}
			}
		}
		if hits == 0 {
			kept = append(kept, m)
			continue
		}
		found += hits
		es, err := r.Entries(ctx, m, true)
		if err != nil {
			return nil, false, err
		}
		mf, err := w.write(m.ManifestContent(), func(mw *iceberg.ManifestWriter) error {
			for _, e := range es {
				var err error
				if gone[e.DataFile().FilePath()] {
					err = mw.Delete(e)
				} else {
					err = mw.Existing(e)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, false, err
		}
		out = append(out, mf)
	}
	if found != len(gone) {
		var missing []string
		live := map[string]bool{}
		for _, m := range ms {
			paths, _ := r.LivePaths(ctx, m)
			for _, p := range paths {
				live[p] = true
			}
		}
		for p := range gone {
			if !live[p] {
				missing = append(missing, p)
			}
		}
		sort.Strings(missing)
		return nil, false, fmt.Errorf("%w: %v", ErrNotLive, missing)
	}
	// Data and delete manifests merge each with their own kind.
	var merged []iceberg.ManifestFile
	for _, content := range []iceberg.ManifestContent{iceberg.ManifestContentData, iceberg.ManifestContentDeletes} {
		of := slices.DeleteFunc(slices.Clone(kept), func(m iceberg.ManifestFile) bool { return m.ManifestContent() != content })
		mm, err := w.mergeSmall(ctx, r, content, of)
		if err != nil {
			return nil, false, err
		}
		merged = append(merged, mm...)
	}
	if sameSet(merged, kept) {
		merged = kept // nothing merged: keep the parent's order
	}
	// Every manifest of the parent's with live entries is carried as it is (none
	// rewritten, none merged): what a live load built on the parent names, this
	// snapshot names too.
	all = len(out) == 0 && samePaths(merged, kept)
	return append(out, merged...), all, nil
}

func sameSet(a, b []iceberg.ManifestFile) bool {
	in := map[string]bool{}
	for _, m := range a {
		in[m.FilePath()] = true
	}
	for _, m := range b {
		if !in[m.FilePath()] {
			return false
		}
	}
	return len(a) == len(b)
}

func samePaths(a, b []iceberg.ManifestFile) bool {
	return slices.EqualFunc(a, b, func(x, y iceberg.ManifestFile) bool { return x.FilePath() == y.FilePath() })
}

// mergeSmall merges manifests below the target size into manifests near it, once there
// are at least mergeMin of them: one manifest per commit would otherwise make every
// manifest list, and every planning, grow with the table's age.
func (w *manifests) mergeSmall(ctx context.Context, r *Reader, content iceberg.ManifestContent, ms []iceberg.ManifestFile) ([]iceberg.ManifestFile, error) {
	var small, out []iceberg.ManifestFile
	for _, m := range ms {
		if m.Length() < int64(w.mergeTarget) {
			small = append(small, m)
		} else {
			out = append(out, m)
		}
	}
	if !w.merge || w.mergeMin <= 0 || len(small) < w.mergeMin {
		return ms, nil
	}
	var bins [][]iceberg.ManifestFile
	var size int64
	for _, m := range small {
		if len(bins) == 0 || size+m.Length() > int64(w.mergeTarget) {
			bins = append(bins, nil)
			size = 0
		}
		bins[len(bins)-1] = append(bins[len(bins)-1], m)
		size += m.Length()
	}
	for _, bin := range bins {
		if len(bin) == 1 {
			out = append(out, bin[0])
			continue
		}
		var all []iceberg.ManifestEntry
		for _, m := range bin {
			es, err := r.Entries(ctx, m, true)
			if err != nil {
				return nil, err
			}
			all = append(all, es...)
		}
		mf, err := w.write(content, func(mw *iceberg.ManifestWriter) error {
			for _, e := range all {
				if err := mw.Existing(e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, mf)
	}
	return out, nil
}

// Standard Iceberg snapshot summary keys.
const (
	sumAddedFiles     = "added-data-files"
	sumAddedRecords   = "added-records"
	sumAddedSize      = "added-files-size"
	sumDeletedFiles   = "deleted-data-files"
	sumDeletedRecords = "deleted-records"
	sumRemovedSize    = "removed-files-size"
	sumChangedParts   = "changed-partition-count"
	sumTotalFiles     = "total-data-files"
	sumTotalRecords   = "total-records"
	sumTotalSize      = "total-files-size"
	sumTotalDeletes   = "total-delete-files"
	sumTotalPosDel    = "total-position-deletes"
	sumTotalEqDel     = "total-equality-deletes"
)

// summarize is the new snapshot's summary: what changed, the table's totals (the
// parent's plus the change, so no manifest is read), and every partition's coverage.
func summarize(parent *table.Snapshot, ch Change) (*table.Summary, error) {
	var prev map[string]string
	if parent != nil && parent.Summary != nil {
		prev = parent.Summary.Properties
	}
	total := func(k string) (int64, error) {
		v, ok := prev[k]
		if !ok {
			if parent != nil {
				return 0, fmt.Errorf("icebergmeta: snapshot %d has no %s in its summary", parent.SnapshotID, k)
			}
			return 0, nil
		}
		return strconv.ParseInt(v, 10, 64)
	}
	parts := map[int32]bool{}
	// tally counts files, their records (positions, for delete files) and bytes.
	tally := func(fs []DataFile) (n, recs, size int64) {
		for _, f := range fs {
			n++
			recs += f.Records
			size += f.Size
			parts[f.Partition] = true
		}
		return n, recs, size
	}
	addFiles, addRecs, addSize := tally(ch.Add)
	delFiles, delRecs, delSize := tally(ch.Remove)
	addDelFiles, addPos, addDelSize := tally(ch.AddDeletes)
	rmDelFiles, rmPos, rmDelSize := tally(ch.RemoveDeletes)
	props := iceberg.Properties{}
	set := func(k string, v int64) { props[k] = strconv.FormatInt(v, 10) }
	setPositive := func(k string, v int64) {
		if v > 0 {
			set(k, v)
		}
	}
	setPositive(sumAddedFiles, addFiles)
	setPositive(sumAddedRecords, addRecs)
	setPositive(sumAddedSize, addSize+addDelSize) // Iceberg's sizes count delete files too
	setPositive(sumDeletedFiles, delFiles)
	setPositive(sumDeletedRecords, delRecs)
	setPositive(sumRemovedSize, delSize+rmDelSize)
	setPositive("added-delete-files", addDelFiles)
	setPositive("added-position-delete-files", addDelFiles)
	setPositive("added-position-deletes", addPos)
	setPositive("removed-delete-files", rmDelFiles)
	setPositive("removed-position-delete-files", rmDelFiles)
	setPositive("removed-position-deletes", rmPos)
	set(sumChangedParts, int64(len(parts)))
	for _, x := range []struct {
		key        string
		add, minus int64
	}{{sumTotalFiles, addFiles, delFiles}, {sumTotalRecords, addRecs, delRecs}, {sumTotalSize, addSize + addDelSize, delSize + rmDelSize},
		{sumTotalDeletes, addDelFiles, rmDelFiles}, {sumTotalPosDel, addPos, rmPos}} {
		t, err := total(x.key)
		if err != nil {
			return nil, err
		}
		if t+x.add-x.minus < 0 {
			return nil, fmt.Errorf("icebergmeta: %s would become negative", x.key)
		}
		set(x.key, t+x.add-x.minus)
	}
	set(sumTotalEqDel, 0)

	cov, err := ParseCoverage(parentSummary(parent))
	if err != nil {
		return nil, err
	}
	for p, c := range ch.Coverage {
		cov[p] = c
	}
	coverageProps(cov, props)
	for k, v := range ch.Summary {
		props[k] = v
	}
	return &table.Summary{Operation: ch.Operation, Properties: props}, nil
}

func parentSummary(s *table.Snapshot) *table.Summary {
	if s == nil {
		return nil
	}
	return s.Summary
}

// Retention is which snapshots expiry keeps.
type Retention struct {
	MaxAge  time.Duration // snapshots older than this are expired...
	MinKeep int           // ...except the newest MinKeep, and the current one, always
	// KeepSuperseded keeps a snapshot at least this long after a newer one replaced it
	// as current, however old the snapshot itself is. A live table load builds its load
	// snapshot on the current snapshot and names that snapshot's manifests and data
	// files; keeping the snapshot keeps them (collection spares what a kept snapshot
	// names), so the load stays readable for its TTL after newer commits. Zero: off.
	KeepSuperseded time.Duration
	// MaxSnapshots caps the snapshots kept however young (never below MinKeep): beyond
	// the newest MaxSnapshots, a snapshot goes once its child carried every manifest of
	// its own as it was (SummaryParentCarried), as then whatever a live load built on it
	// names stays named by a kept snapshot: the child, or the first descendant whose
	// parent was not carried whole, which KeepSuperseded keeps. Zero: no cap.
	MaxSnapshots int
}

// SummaryParentCarried marks a writer's snapshot that carries every manifest of its
// parent as it is: "true".
const SummaryParentCarried = "mink.parent-manifests-carried"

// Retention defaults: Iceberg's property names, with Mink's defaults (Iceberg keeps
// snapshots 5 days; Mink commits every few seconds and its data lives in Kafka).
const (
	DefaultMaxSnapshotAge = time.Hour
	DefaultMinSnapshots   = 5
)

// RetentionOf reads history.expire.max-snapshot-age-ms and
// history.expire.min-snapshots-to-keep; bad values fall back to the defaults. While
// live loads are on (tables.PropLiveLoad), a replaced snapshot is also kept for the
// live TTL (tables.PropLiveTTL) after it was replaced, but never longer than MaxAge:
// LiveTTLOf is what a load snapshot is then promised.
func RetentionOf(props map[string]string) Retention {
	r := Retention{MaxAge: DefaultMaxSnapshotAge, MinKeep: DefaultMinSnapshots}
	if ms, err := strconv.ParseInt(props[table.MaxSnapshotAgeMsKey], 10, 64); err == nil && ms > 0 {
		r.MaxAge = time.Duration(ms) * time.Millisecond
	}
	if n, err := strconv.Atoi(props[table.MinSnapshotsToKeepKey]); err == nil && n > 0 {
		r.MinKeep = n
	}
	if on, ttl := liveProps(props); on {
		r.KeepSuperseded = min(ttl, r.MaxAge)
	}
	r.MaxSnapshots = tables.DefaultProps.HistoryMaxSnapshots
	if v, ok := props[tables.PropHistoryMaxSnapshots]; ok {
		if p, err := tables.ParseProps(map[string]string{tables.PropHistoryMaxSnapshots: v}); err == nil {
			r.MaxSnapshots = p.HistoryMaxSnapshots
		}
	}
	r.MaxSnapshots = max(r.MaxSnapshots, r.MinKeep)
	return r
}

// LiveTTLOf is how long a live load snapshot of a table with these properties stays
// readable after newer commits: the live TTL, capped by the snapshot retention age
// (beyond it the writer may expire the snapshot the load was built on).
func LiveTTLOf(props map[string]string) time.Duration {
	_, ttl := liveProps(props)
	return min(ttl, RetentionOf(props).MaxAge)
}

// liveProps reads whether live loads are on and their TTL; bad values count as the
// defaults, as tables.Table.Props reads them.
func liveProps(props map[string]string) (on bool, ttl time.Duration) {
	on, ttl = tables.DefaultProps.LiveLoad, tables.DefaultProps.LiveTTL
	if v, ok := props[tables.PropLiveLoad]; ok {
		if p, err := tables.ParseProps(map[string]string{tables.PropLiveLoad: v}); err == nil {
			on = p.LiveLoad
		}
	}
	if v, ok := props[tables.PropLiveTTL]; ok {
		if p, err := tables.ParseProps(map[string]string{tables.PropLiveTTL: v}); err == nil {
			ttl = p.LiveTTL
		}
	}
	return on, ttl
}

// Expirable returns the snapshots of md that retention expires at now: older than
// MaxAge and not among the newest MinKeep (counting added, a snapshot about to be
// added), or beyond the newest MaxSnapshots and carried whole by their child; never the
// current one nor one a ref names.
func Expirable(md table.Metadata, added *int64, now time.Time, ret Retention) []int64 {
	type snap struct {
		id int64
		ts int64
	}
	var all []snap
	for _, s := range md.Snapshots() {
		all = append(all, snap{s.SnapshotID, s.TimestampMs})
	}
	keep := map[int64]bool{}
	for name, ref := range md.Refs() {
		if name == table.MainBranch && added != nil {
			continue // main moves to the added snapshot
		}
		keep[ref.SnapshotID] = true
	}
	if cur := md.CurrentSnapshot(); cur != nil && added == nil {
		keep[cur.SnapshotID] = true
	}
	// Newest first; the one being added is the newest of all.
	sort.Slice(all, func(i, j int) bool { return all[i].ts > all[j].ts || all[i].ts == all[j].ts && all[i].id > all[j].id })
	n := ret.MinKeep
	if added != nil {
		n--
	}
	for i := 0; i < len(all) && i < n; i++ {
		keep[all[i].id] = true
	}
	// When each snapshot was replaced as current: when its first child was made (the
	// current one is being replaced now when a snapshot is added).
	replaced := map[int64]int64{}
	for _, s := range md.Snapshots() {
		if p := s.ParentSnapshotID; p != nil {
			if at, ok := replaced[*p]; !ok || s.TimestampMs < at {
				replaced[*p] = s.TimestampMs
			}
		}
	}
	if cur := md.CurrentSnapshot(); cur != nil && added != nil {
		if _, ok := replaced[cur.SnapshotID]; !ok {
			replaced[cur.SnapshotID] = now.UnixMilli()
		}
	}
	// Which snapshots every child carried whole (see Retention.MaxSnapshots).
	carried, split := map[int64]bool{}, map[int64]bool{}
	for _, s := range md.Snapshots() {
		if p := s.ParentSnapshotID; p != nil {
			if s.Summary != nil && s.Summary.Properties[SummaryParentCarried] == "true" {
				carried[*p] = true
			} else {
				split[*p] = true
			}
		}
	}
	var current int64 = -1
	if cur := md.CurrentSnapshot(); cur != nil && added != nil {
		current = cur.SnapshotID // its child is the one being added: not known here
	}
	cutoff := now.Add(-ret.MaxAge).UnixMilli()
	keepReplacedFrom := now.Add(-ret.KeepSuperseded).UnixMilli()
	var out []int64
	for i, s := range all {
		if keep[s.id] {
			continue
		}
		rank := i // newer snapshots kept, the one being added among them
		if added != nil {
			rank++
		}
		if ret.MaxSnapshots > 0 && rank >= ret.MaxSnapshots && carried[s.id] && !split[s.id] && s.id != current {
			out = append(out, s.id)
			continue
		}
		if s.ts >= cutoff {
			continue
		}
		if ret.KeepSuperseded > 0 {
			at, ok := replaced[s.id]
			if !ok {
				at = s.ts
			}
			if at >= keepReplacedFrom {
				continue
			}
		}
		out = append(out, s.id)
	}
	slices.Sort(out)
	return out
}

func propInt(props map[string]string, key string, def int) int {
	if n, err := strconv.Atoi(props[key]); err == nil {
		return n
	}
	return def
}

func propBool(props map[string]string, key string, def bool) bool {
	if b, err := strconv.ParseBool(props[key]); err == nil {
		return b
	}
	return def
}
