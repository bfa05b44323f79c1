package writer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tables"
)

var (
	// errTableGone: the table was dropped; its lease goes with it.
	errTableGone = errors.New("table dropped")
	// ErrConflict: the commit pointer moved since this writer read it, so its commit
	// did not become current. Only another holder of the lease can have moved it.
	ErrConflict = errors.New("writer: table metadata changed concurrently")
)

// maxCommitFiles bounds the files one append adds, so a long backlog is committed in
// several snapshots of bounded size rather than one huge one.
const maxCommitFiles = 10000

// tableWriter is one table's writer while one lease lasts. Only its loop goroutine
// touches its state; assembly builds run beside it and hand results back.
type tableWriter struct {
	w      *Writer
	l      lease.Lease
	log    *slog.Logger
	tbl    tables.Table
	meta   icebergmeta.Table
	cfg    config
	reader *icebergmeta.Reader
	attrs  metric.MeasurementOption

	st       state
	logStart map[int32]int64 // Kafka's log start offsets at the last maintenance

	assembling   bool
	assemblyDue  bool // files came or went since the last round was planned
	assemblyDone chan []merge
	repairing    bool
	repairDue    bool // a file problem was reported, or files left to check, since the round began
	repairDone   chan []repair
	reported     <-chan struct{}                 // a file server reported a problem of the table (WatchProblems)
	suspects     map[int32]bool                  // partitions Kafka compacted whose files are still to check
	verified     map[string]int32                // suspect files that rebuilt as recorded, and their partitions
	older        map[string]icebergmeta.DataFile // rows of files only older snapshots name (olderFiles)
	expiredBelow map[int32]int64                 // the log starts below which snapshots were last expired
	wg           sync.WaitGroup
	pending      pendingDeletes // of the change being committed (upsert tables)
}

// state is the table's current metadata as this writer committed or read it.
type state struct {
	base  icebergmeta.Base
	cover map[int32]icebergmeta.Coverage
	live  map[int32][]icebergmeta.DataFile // the current snapshot's files, by Start
	keys  map[string]bool                  // keys of live
	// deletes are the current snapshot's position delete files (upsert tables), by the
	// key of the data file each deletes rows of.
	deletes map[string]icebergmeta.DataFile
}

// open loads the table and its current metadata, creating the first metadata (no
// snapshot: an empty table that loads) if there is none yet.
func (w *Writer) open(ctx context.Context, l lease.Lease, log *slog.Logger, reported <-chan struct{}) (*tableWriter, error) {
	tbl, err := tables.GetByID(ctx, w.db, l.Table)
	if err != nil {
		if apierr.Classify(err) == apierr.NotFound {
			return nil, fmt.Errorf("%w: %v", errTableGone, err)
		}
		return nil, err
	}
	cfg, bad := configOf(tbl)
	for _, err := range bad {
		log.Warn("bad writer property; using its default", "error", err)
	}
	metaFiles := icebergmeta.StoreFunc(func(ctx context.Context, key string) ([]byte, error) {
		return objects.MetaFile(ctx, w.db, l.Table, key)
	})
	tw := &tableWriter{
		w: w, l: l, log: log, tbl: tbl, cfg: cfg,
		meta:         icebergmeta.Table{Namespace: tbl.Namespace, Name: tbl.Name, Properties: tbl.Properties},
		reader:       icebergmeta.NewReader(metaFiles),
		attrs:        metric.WithAttributes(attribute.String("table", tbl.FullName())),
		logStart:     map[int32]int64{},
		assemblyDone: make(chan []merge, 1),
		repairDone:   make(chan []repair, 1),
		reported:     reported,
		suspects:     map[int32]bool{},
		verified:     map[string]int32{},
		older:        map[string]icebergmeta.DataFile{},
		expiredBelow: map[int32]int64{},
	}
	// The series exists from the lease's start, so that increase() over a window counts
	// this node's first commit too (alerts on a table that stopped committing use it).
	w.m.records.Add(ctx, 0, tw.attrs)
	if err := tw.loadSchemas(ctx); err != nil {
		return nil, err
	}
	if err := tw.load(ctx); err != nil {
		return nil, err
	}
	return tw, nil
}

// loadSchemas reads the table's schema versions: the current one's schema is what
// commits make current, after adding every schema the metadata lacks.
func (tw *tableWriter) loadSchemas(ctx context.Context) error {
	vs, err := tables.Versions(ctx, tw.w.db, tw.tbl.ID)
	if err != nil {
		return err
	}
	tw.meta.Schema, tw.meta.Schemas = nil, nil
	seen := map[int]bool{}
	for _, v := range vs {
		if !seen[v.Schema.ID] {
			seen[v.Schema.ID] = true
			tw.meta.Schemas = append(tw.meta.Schemas, v.Schema)
		}
		if v.ID == tw.tbl.Version {
			tw.meta.Schema = v.Schema
		}
	}
	if tw.meta.Schema == nil {
		return fmt.Errorf("table %s: current schema version %d is not stored", tw.tbl.FullName(), tw.tbl.Version)
	}
	// Every spec the table has had, its current version's the metadata's default.
	if tw.meta.Specs, err = tables.PartitionSpecs(ctx, tw.w.db, tw.tbl.ID); err != nil {
		return err
	}
	cur, err := tw.tbl.Partitioning(tw.meta.Schema)
	if err != nil {
		return err
	}
	tw.meta.SpecID = cur.ID
	return nil
}

// refresh rereads the table's definition: a new schema version (the indexers evolved it,
// or AlterTable) or new properties. It reports whether the metadata must change for
// them even without new files.
func (tw *tableWriter) refresh(ctx context.Context) (bool, error) {
	t, err := tables.GetByID(ctx, tw.w.db, tw.l.Table)
	if err != nil {
		if apierr.Classify(err) == apierr.NotFound {
			return false, fmt.Errorf("%w: %v", errTableGone, err)
		}
		return false, err
	}
	if t.Version != tw.tbl.Version {
		tw.tbl.Version, tw.tbl.PartitionSpec = t.Version, t.PartitionSpec
		if err := tw.loadSchemas(ctx); err != nil {
			return false, err
		}
		tw.log.Info("new schema version", "version", t.Version, "schema_id", tw.meta.Schema.ID)
	}
	if !maps.Equal(t.Properties, tw.tbl.Properties) {
		tw.tbl.Properties, tw.meta.Properties = t.Properties, t.Properties
		cfg, bad := configOf(t)
		for _, err := range bad {
			tw.log.Warn("bad writer property; using its default", "error", err)
		}
		tw.cfg = cfg
	}
	tw.tbl.Spec = t.Spec
	md := tw.st.base.Metadata
	return md != nil && (md.CurrentSchema().ID != tw.meta.Schema.ID || md.DefaultPartitionSpec() != tw.meta.SpecID ||
		!maps.Equal(icebergProps(md), icebergmeta.PropertiesOf(tw.meta))), nil
}

// load reads the current metadata, its coverage and its files.
func (tw *tableWriter) load(ctx context.Context) error {
	key, version, found, err := objects.Current(ctx, tw.w.db, tw.l.Table)
	if err == nil && !found {
		res, err := icebergmeta.Create(tw.meta)
		if err != nil {
			return err
		}
		tw.st = state{cover: map[int32]icebergmeta.Coverage{}, live: map[int32][]icebergmeta.DataFile{}, keys: map[string]bool{},
			deletes: map[string]icebergmeta.DataFile{}}
		if err := tw.store(ctx, "create", res, nil, nil); err != nil {
			return err
		}
		tw.log.Info("created the table's first metadata", "metadata", res.Key)
		return nil
	}
	if err != nil {
		return err
	}
	content, err := objects.MetaFile(ctx, tw.w.db, tw.l.Table, key)
	if err != nil {
		return err
	}
	md, err := table.ParseMetadataBytes(content)
	if err != nil {
		return fmt.Errorf("current metadata %s: %w", key, err)
	}
	st := state{base: icebergmeta.Base{Version: version, Key: key, Metadata: md}, live: map[int32][]icebergmeta.DataFile{}, keys: map[string]bool{},
		deletes: map[string]icebergmeta.DataFile{}}
	var summary *table.Summary
	if s := md.CurrentSnapshot(); s != nil {
		summary = s.Summary
	}
	if st.cover, err = icebergmeta.ParseCoverage(summary); err != nil {
		return err
	}
	uris, err := tw.reader.SnapshotFiles(ctx, md.CurrentSnapshot())
	if err != nil {
		return err
	}
	files, err := tw.rowsOf(ctx, "data", uris)
	if err != nil {
		return err
	}
	st.apply(files, nil)
	if err := tw.loadDeletes(ctx, &st); err != nil {
		return err
	}
	tw.st = st
	tw.log.Info("writing", "metadata", key, "version", version, "files", len(files))
	return nil
}

// apply records that add joined and remove left the current snapshot.
func (st *state) apply(add, remove []icebergmeta.DataFile) {
	touched := map[int32]bool{}
	for _, f := range remove {
		delete(st.keys, f.Key)
		touched[f.Partition] = true
	}
	for _, f := range add {
		st.keys[f.Key] = true
		st.live[f.Partition] = append(st.live[f.Partition], f)
		touched[f.Partition] = true
	}
	for p := range touched {
		fs := slices.DeleteFunc(st.live[p], func(f icebergmeta.DataFile) bool { return !st.keys[f.Key] })
		slices.SortFunc(fs, func(a, b icebergmeta.DataFile) int { return cmp.Compare(a.Start, b.Start) })
		if len(fs) == 0 {
			delete(st.live, p)
		} else {
			st.live[p] = fs
		}
	}
}

// loop commits every commit interval and maintains every maintenance interval until
// ctx ends or something fails. It waits for a running assembly build before returning.
func (tw *tableWriter) loop(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer tw.wg.Wait()
	defer cancel()
	tick := time.NewTicker(tw.cfg.commitInterval)
	defer tick.Stop()
	var lastMaint time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ms := <-tw.assemblyDone:
			tw.assembling = false
			if err := tw.commitAssembly(ctx, ms); err != nil {
				return err
			}
			// A round cut by its budget left merges for the next; planning finds them.
			tw.assemblyDue = tw.assemblyDue || len(ms) > 0
		case rs := <-tw.repairDone:
			tw.repairing = false
			if err := tw.commitRepairs(ctx, rs); err != nil {
				return err
			}
			if tw.repairDue {
				if err := tw.startRepairs(ctx); err != nil {
					return err
				}
			}
		case <-tw.reported:
			// At once, not at the next maintenance: reads of the file answer 503 until
			// the repair.
			if err := tw.startRepairs(ctx); err != nil {
				return err
			}
		case <-tick.C:
			if err := tw.commitNew(ctx); err != nil {
				return err
			}
			if time.Since(lastMaint) >= tw.cfg.maintenance {
				lastMaint = time.Now()
				if err := tw.maintain(ctx); err != nil {
					return err
				}
			}
			// Assembly also follows commits, not only maintenance, so that a quiet
			// partition's newest files merge as soon as k of a tier are there.
			if tw.assemblyDue && !tw.assembling {
				tw.assemblyDue = false
				tw.startAssembly(ctx)
			}
		}
	}
}

// maintain runs expiry, repairs of reported files, assembly and collection. Kafka being
// unreachable only skips what needs it; commits go on. Assembly runs here with the log
// start offsets just read; between maintenances it runs after commits with the last
// ones read (a file that has since gone below the log start fails to build, and waits
// for expiry).
func (tw *tableWriter) maintain(ctx context.Context) error {
	id, offs, err := tw.w.kafka.TopicOffsets(ctx, tw.tbl.Topic)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		tw.log.Warn("cannot read Kafka's log start offsets; skipping file expiry, repairs and assembly", "error", err)
	} else if why := tw.topicLost(id, offs); why != "" {
		// Kafka holds another topic's records at the table's offsets: an assembly or a
		// repair would build them into the table. The table waits for its reset.
		tw.log.Warn("the table's topic is not the one it indexed; skipping file expiry, repairs and assembly until the table is reset", "reason", why)
	} else {
		for _, o := range offs {
			tw.logStart[o.Partition] = o.LogStart
		}
		if err := tw.expireFiles(ctx, offs); err != nil {
			return err
		}
		if err := tw.startRepairs(ctx); err != nil {
			return err
		}
		tw.startAssembly(ctx)
	}
	if err := tw.expireSnapshots(ctx); err != nil {
		return err
	}
	return tw.collect(ctx)
}

// topicLost says why the topic Kafka has now (id, offs) is not the one the table indexed
// up to its committed coverage, or "" (tables.TopicChanged; the indexer records it).
func (tw *tableWriter) topicLost(id kafkasrc.TopicID, offs []kafkasrc.PartitionOffsets) string {
	if tw.tbl.TopicLost != "" {
		return tw.tbl.TopicLost
	}
	high := make(map[int32]int64, len(offs))
	for _, o := range offs {
		high[o.Partition] = o.HighWatermark
	}
	covered := make(map[int32]int64, len(tw.st.cover))
	for p, c := range tw.st.cover {
		covered[p] = c.End
	}
	return tables.TopicChanged(tw.tbl, id.String(), high, covered)
}

// dbNow is the database's clock: snapshot timestamps and retention use it, never a
// node's own clock.
func (tw *tableWriter) dbNow(ctx context.Context) (time.Time, error) {
	return pg.Now(ctx, tw.w.db)
}

// commitNew commits the ranges indexed beyond the current snapshot as one append, with
// the table's current schema and properties (alone, when there are no new ranges).
func (tw *tableWriter) commitNew(ctx context.Context) error {
	metaChanged, err := tw.refresh(ctx)
	if err != nil {
		return err
	}
	parts, err := ranges.Partitions(ctx, tw.w.db, tw.l.Table)
	if err != nil {
		return err
	}
	var add []icebergmeta.DataFile
	cover := map[int32]icebergmeta.Coverage{}
	var lag int64
	for _, p := range parts {
		if !p.Indexed || len(add) >= maxCommitFiles {
			continue
		}
		c, has := tw.st.cover[p.Partition]
		if has && p.IndexedEnd <= c.End {
			continue
		}
		from := int64(-1)
		if has {
			from = c.End
		}
		rs, err := ranges.List(ctx, tw.w.db, tw.l.Table, p.Partition, from)
		if err != nil {
			return err
		}
		if len(rs) == 0 {
			continue
		}
		next := rs[0].Start
		if has && next != c.End {
			return fmt.Errorf("partition %d: the index continues at offset %d, the snapshot ends at %d", p.Partition, next, c.End)
		}
		nc := icebergmeta.Coverage{Start: next}
		if has {
			nc.Start = c.Start
		}
		for _, r := range rs {
			if r.Start != next {
				return fmt.Errorf("partition %d: the index has a gap [%d, %d)", p.Partition, next, r.Start)
			}
			if len(add) >= maxCommitFiles {
				break
			}
			if r.Records > 0 {
				// A range of offsets without rows (transaction markers, records Kafka
				// deleted before indexing) is covered but needs no file.
				add = append(add, fromRange(tw.tbl, r))
			}
			next = r.End
		}
		nc.End = next
		cover[p.Partition] = nc
		lag += max(0, p.IndexedEnd-next)
	}
	if ht, ok := tw.w.held.Load(tw.l.Scope); ok {
		ht.(*heldTable).lag.Store(lag)
	}
	if len(cover) == 0 {
		if metaChanged {
			return tw.commitMeta(ctx)
		}
		return nil
	}
	for _, f := range add {
		if tw.st.keys[f.Key] {
			return fmt.Errorf("range file %s is already in the current snapshot", f.Key)
		}
	}
	now, err := tw.dbNow(ctx)
	if err != nil {
		return err
	}
	res, err := tw.commit(ctx, icebergmeta.Change{
		Operation: table.OpAppend, Add: add, Coverage: cover, Now: now,
	})
	if err != nil {
		return err
	}
	if err := tw.store(ctx, string(table.OpAppend), res, add, nil); err != nil {
		return err
	}
	tw.st.apply(add, nil)
	for p, c := range cover {
		tw.st.cover[p] = c
	}
	tw.assemblyDue = tw.assemblyDue || len(add) > 0
	var recs int64
	for _, f := range add {
		recs += f.Records
	}
	tw.w.m.filesAdded.Add(ctx, int64(len(add)), tw.attrs)
	tw.w.m.records.Add(ctx, recs, tw.attrs)
	tw.log.Debug("committed new ranges", "files", len(add), "records", recs, "version", res.Version, "snapshot", res.Snapshot.SnapshotID)
	return nil
}

// commitMeta commits a new schema or new properties with no new snapshot.
func (tw *tableWriter) commitMeta(ctx context.Context) error {
	now, err := tw.dbNow(ctx)
	if err != nil {
		return err
	}
	res, err := icebergmeta.Commit(ctx, tw.reader, tw.meta, tw.st.base, icebergmeta.Change{Now: now})
	if errors.Is(err, icebergmeta.ErrNoChange) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := tw.store(ctx, "update", res, nil, nil); err != nil {
		return err
	}
	tw.log.Info("committed the table's schema and properties", "schema_id", tw.meta.Schema.ID, "version", res.Version)
	return nil
}

func icebergProps(md table.Metadata) map[string]string { return md.Properties() }

// fromRange is the data file of an indexed range.
func fromRange(t tables.Table, r ranges.Range) icebergmeta.DataFile {
	return icebergmeta.DataFile{
		Key: layout.DataKey(t.Namespace, t.Name, r.Partition, r.Start, r.End, r.SHA256), Partition: r.Partition,
		Start: r.Start, End: r.End, Records: r.Records, Size: r.Size, SHA256: r.SHA256, Settings: r.Settings, Stats: r.Stats,
	}
}

// store makes res current in one transaction under the writer lease: the data files it
// adds (rows for the file servers), its metadata files, the deletion of the file
// problems reported for the files it removes (no longer the current snapshot's) and of
// those resolved (files of the snapshots it expires), and the
// compare-and-set of the commit pointer from res.Version-1 to res.Version. Either all of
// it happens or none.
func (tw *tableWriter) store(ctx context.Context, op string, res *icebergmeta.Result, add, remove []icebergmeta.DataFile, resolved ...string) error {
	if tw.w.beforeStore != nil {
		tw.w.beforeStore(ctx, op)
	}
	var snapID *int64
	if s := res.Metadata.CurrentSnapshot(); s != nil {
		id := s.SnapshotID
		snapID = &id
	}
	pending := tw.pending
	tw.pending = pendingDeletes{}
	if len(pending.add)+len(pending.remove) > 0 {
		add = append(slices.Clip(add), pending.add...)
		remove = append(slices.Clip(remove), pending.remove...)
	}
	began := time.Now()
	err := lease.Fenced(ctx, tw.w.db, tw.l, func(tx pgx.Tx) error {
		err := objects.StoreCommit(ctx, tx, objects.Commit{Table: tw.l.Table, Add: add, MetaFiles: res.Files, Removed: append(keysOf(remove), resolved...),
			Key: res.Key, Version: res.Version, SnapshotID: snapID})
		if errors.Is(err, objects.ErrStale) {
			return fmt.Errorf("%w: version %d is no longer current", ErrConflict, res.Version-1)
		}
		if err != nil {
			return err
		}
		return ranges.Rederive(ctx, tx, tw.l.Table, pending.ranges)
	})
	result := "ok"
	if err != nil {
		result = "failed"
	}
	tw.w.m.commitTime.Record(ctx, time.Since(began).Seconds(), metric.WithAttributes(
		attribute.String("table", tw.tbl.FullName()), attribute.String("operation", op), attribute.String("result", result)))
	if err != nil {
		tw.w.m.conflicts.Add(ctx, 1, tw.attrs)
		return fmt.Errorf("commit %s as version %d: %w", op, res.Version, err)
	}
	tw.st.base = icebergmeta.Base{Version: res.Version, Key: res.Key, Metadata: res.Metadata}
	tw.st.applyPending(pending)
	tw.w.m.commits.Add(ctx, 1, metric.WithAttributes(attribute.String("table", tw.tbl.FullName()), attribute.String("operation", op)))
	if len(res.Expired) > 0 {
		tw.log.Info("expired snapshots", "snapshots", len(res.Expired), "version", res.Version)
	}
	return nil
}
