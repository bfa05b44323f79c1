package live

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	"golang.org/x/sync/errgroup"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/files"
)

// candidate is a file (or a run of offsets without rows) that can be part of a tail.
type candidate struct {
	start, end int64
	file       icebergmeta.DataFile // Records 0: offsets without rows, no file to name
	indexed    bool                 // an indexed range (preferred: the writer commits it)
}

// tail is one partition's tail as built.
type tail struct {
	span
	files    []icebergmeta.DataFile // with rows, in offset order
	measured []string               // keys of files measured for this load
	// keyed are the keys of the tail's files that are not indexed ranges, rows or not,
	// in offset order: an upsert table's deletes read their recorded keys.
	keyed []string
}

// build makes the load snapshot of spans and records it as rec (its files filled in):
// objects.ErrLoadExists when another node recorded the same first.
func (l *Loader) build(ctx context.Context, t tables.Table, props tables.Props, ttl time.Duration, base Base, spans []span, rec objects.Load) (Result, error) {
	md, err := parseMetadata(t, base)
	if err != nil {
		return Result{}, err
	}
	cands, err := l.candidates(ctx, t, spans)
	if err != nil {
		return Result{}, err
	}
	tails := make([]*tail, len(spans))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxConcurrentMeasures)
	for i, s := range spans {
		tails[i] = &tail{span: s}
		g.Go(func() error { return l.chain(gctx, t, props, ttl, tails[i], cands[s.p]) })
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	if err := l.fillMeasured(ctx, t, tails); err != nil {
		return Result{}, err
	}
	reader := icebergmeta.NewReader(icebergmeta.StoreFunc(func(ctx context.Context, key string) ([]byte, error) {
		var b []byte
		err := l.query(ctx, func(ctx context.Context) (err error) {
			b, err = objects.MetaFile(ctx, l.o.DB, t.ID, key)
			return err
		})
		if errors.Is(err, icebergmeta.ErrNoMetaFile) {
			return nil, fmt.Errorf("metadata file %s is missing", key)
		}
		return b, apierr.Postgres(err, "read %s", key)
	}))
	var dels []objects.LoadDelete
	var replaced []icebergmeta.DataFile
	if t.Upsert() {
		if dels, replaced, err = l.deletes(ctx, t, md, reader, tails); err != nil {
			return Result{}, err
		}
	}

	var now time.Time
	if err := l.query(ctx, func(ctx context.Context) (err error) {
		now, err = pg.Now(ctx, l.o.DB)
		return err
	}); err != nil {
		return Result{}, apierr.Postgres(err, "load table %s", t.FullName())
	}
	expires := now.Add(ttl)
	summary := map[string]string{
		SummaryLive:      "true",
		SummaryExpiresAt: strconv.FormatInt(expires.UnixMilli(), 10),
	}
	if s := md.CurrentSnapshot(); s != nil {
		summary[SummaryBaseSnapshot] = strconv.FormatInt(s.SnapshotID, 10)
	}
	var add []icebergmeta.DataFile
	coverage := map[int32]icebergmeta.Coverage{}
	var records int64
	cut := 0
	for _, tl := range tails {
		add = append(add, tl.files...)
		for _, f := range tl.files {
			records += f.Records
		}
		committedEnd, covStart := tl.start, tl.start
		if tl.covered {
			committedEnd, covStart = tl.cov.End, tl.cov.Start
		}
		if tl.end > tl.start {
			coverage[tl.p] = icebergmeta.Coverage{Start: covStart, End: tl.end}
		}
		summary[PartitionKey(tl.p, SuffixCommittedEnd)] = strconv.FormatInt(committedEnd, 10)
		summary[PartitionKey(tl.p, SuffixTailStart)] = strconv.FormatInt(tl.start, 10)
		summary[PartitionKey(tl.p, SuffixTailEnd)] = strconv.FormatInt(tl.end, 10)
		summary[PartitionKey(tl.p, SuffixLastStable)] = strconv.FormatInt(tl.lso, 10)
		summary[PartitionKey(tl.p, SuffixTailFiles)] = strconv.Itoa(len(tl.files))
		if tl.cut != "" {
			summary[PartitionKey(tl.p, SuffixCut)] = tl.cut
			cut++
			l.n.cut.Add(1)
			l.log.InfoContext(ctx, "live load tail cut at its limit", "table", t.FullName(), "partition", tl.p,
				"tail_start", tl.start, "tail_end", tl.end, "last_stable_offset", tl.lso, "limit", tl.cut)
		}
	}
	summary[SummaryTailFiles] = strconv.Itoa(len(add))
	summary[SummaryTailRecords] = strconv.FormatInt(records, 10)
	summary[SummaryCutPartitions] = strconv.Itoa(cut)

	var schema *iceberg.Schema
	var schemas []*iceberg.Schema
	err = l.query(ctx, func(ctx context.Context) error {
		var err error
		schema, schemas, err = l.o.Codecs.Schemas(ctx, t)
		return err
	})
	if err != nil {
		return Result{}, apierr.Postgres(err, "load table %s: read its schema", t.FullName())
	}
	meta := icebergmeta.Table{Namespace: t.Namespace, Name: t.Name, Schema: schema, Schemas: schemas, Properties: t.Properties}
	if t.PartitionSpec != nil { // specs stored (none: the default alone)
		cur, err := t.Partitioning(schema)
		if err == nil {
			err = l.query(ctx, func(ctx context.Context) error {
				var err error
				meta.Specs, err = tables.PartitionSpecs(ctx, l.o.DB, t.ID)
				return err
			})
		}
		if err != nil {
			return Result{}, apierr.Postgres(err, "load table %s: read its partition specs", t.FullName())
		}
		meta.SpecID = cur.ID
	}
	addDeletes := make([]icebergmeta.DataFile, len(dels))
	for i, d := range dels {
		addDeletes[i] = d.File
	}
	res, err := icebergmeta.Live(ctx, reader, meta, icebergmeta.Base{Key: base.Key, Metadata: md},
		icebergmeta.LiveChange{Add: add, AddDeletes: addDeletes, RemoveDeletes: replaced, Coverage: coverage, Summary: summary, Now: now})
	if err != nil {
		if apierr.Classify(err) == apierr.Unavailable {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("load table %s: %w", t.FullName(), err)
	}
	rec.Tail, rec.Deletes, rec.Meta = add, dels, res.Files
	err = l.query(ctx, func(ctx context.Context) error { return objects.SaveLoad(ctx, l.o.DB, rec) })
	if errors.Is(err, objects.ErrLoadExists) {
		return Result{}, err
	}
	if errors.Is(err, objects.ErrTailGone) {
		return Result{}, apierr.Wrap(apierr.Unavailable, err, "load table %s: a tail file expired while the load was made; load again", t.FullName())
	}
	if err != nil {
		return Result{}, apierr.Postgres(err, "load table %s: record its load snapshot", t.FullName())
	}
	keys := make([]string, 0, len(add)+len(dels)+len(res.Files))
	for _, f := range add {
		keys = append(keys, f.Key)
	}
	for _, d := range dels {
		keys = append(keys, d.File.Key)
	}
	for _, f := range res.Files {
		keys = append(keys, f.Key)
	}
	l.o.Files.Created(keys...)
	content := res.Files[len(res.Files)-1].Content // the metadata JSON, last
	l.log.DebugContext(ctx, "made a live load", "table", t.FullName(), "metadata", res.Key, "base", base.Key,
		"tail_files", len(add), "tail_records", records, "cut_partitions", cut)
	return Result{Key: res.Key, Content: content, Live: true}, nil
}

// candidates reads, for every span, the indexed ranges and unexpired tail files within
// it, by partition.
func (l *Loader) candidates(ctx context.Context, t tables.Table, spans []span) (map[int32][]candidate, error) {
	ss := make([]objects.Span, len(spans))
	for i, s := range spans {
		ss[i] = objects.Span{Partition: s.p, Start: s.start, End: s.end}
	}
	var indexed, tails []icebergmeta.DataFile
	err := l.query(ctx, func(ctx context.Context) (err error) {
		indexed, tails, err = objects.LoadCandidates(ctx, l.o.DB, t.ID, ss, t.Upsert())
		return err
	})
	if err != nil {
		return nil, apierr.Postgres(err, "load table %s: read its tail files", t.FullName())
	}
	out := map[int32][]candidate{}
	for _, f := range indexed {
		f.Key = dataKey(t, f.Partition, f.Start, f.End, f.SHA256)
		out[f.Partition] = append(out[f.Partition], candidate{start: f.Start, end: f.End, file: f, indexed: true})
	}
	for _, f := range tails {
		out[f.Partition] = append(out[f.Partition], candidate{start: f.Start, end: f.End, file: f})
	}
	return out, nil
}

// chain makes one partition's tail from its candidates: from the tail's start, the
// longest candidate that starts there (an indexed range on a tie), again and again;
// where none starts, a new file up to the next candidate (or the end), measured by its
// owner. A measure cut at the byte budget ends the tail there.
func (l *Loader) chain(ctx context.Context, t tables.Table, props tables.Props, ttl time.Duration, tl *tail, cands []candidate) error {
	pos, budget := tl.start, props.LiveMaxBytes
	for pos < tl.end {
		best := -1
		for i, c := range cands {
			if c.start != pos || c.end > tl.end {
				continue
			}
			if best < 0 || c.end > cands[best].end || c.end == cands[best].end && c.indexed && !cands[best].indexed {
				best = i
			}
		}
		if best >= 0 {
			if c := cands[best]; c.file.Records > 0 {
				tl.files = append(tl.files, c.file)
			}
			if c := cands[best]; !c.indexed {
				tl.keyed = append(tl.keyed, c.file.Key)
			}
			pos = cands[best].end
			continue
		}
		next := tl.end
		for _, c := range cands {
			if c.start > pos && c.start < next {
				next = c.start
			}
		}
		if budget <= 0 { // an earlier gap of this tail read the whole budget
			tl.end, tl.cut = pos, CutMaxBytes
			break
		}
		l.n.measures.Add(1)
		m, err := l.o.Files.Measure(ctx, files.MeasureRequest{Table: t, Partition: tl.p, Start: pos, End: next,
			MaxBytes: budget, TTL: ttl})
		if err != nil {
			return err
		}
		budget -= m.Read
		if m.End == pos && m.Cut == files.CutSchema {
			tl.end, tl.cut = pos, CutSchema
			break
		}
		if m.End <= pos || m.End > next {
			return fmt.Errorf("measure of %s partition %d [%d, %d) ended at %d", t.FullName(), tl.p, pos, next, m.End)
		}
		// Placeholder until its row is read: rows, size and statistics.
		tl.files = append(tl.files, icebergmeta.DataFile{Key: m.Key, Partition: tl.p, Start: pos, End: m.End})
		tl.measured = append(tl.measured, m.Key)
		tl.keyed = append(tl.keyed, m.Key)
		pos = m.End
		if m.End < next && m.Cut == files.CutPoint {
			continue // a schema change takes effect there: the rest is another file
		}
		if m.End < next {
			tl.end, tl.cut = m.End, CutMaxBytes
			if m.Cut == files.CutSchema {
				tl.cut = CutSchema
			}
			break
		}
	}
	return nil
}

// fillMeasured reads the rows of the files measured for this load and puts them in
// place; files without rows leave the tail.
func (l *Loader) fillMeasured(ctx context.Context, t tables.Table, tails []*tail) error {
	var keys []string
	for _, tl := range tails {
		keys = append(keys, tl.measured...)
	}
	if len(keys) == 0 {
		return nil
	}
	var rows map[string]icebergmeta.DataFile
	err := l.query(ctx, func(ctx context.Context) (err error) {
		rows, err = objects.DataFiles(ctx, l.o.DB, keys)
		return err
	})
	if err != nil {
		return apierr.Postgres(err, "load table %s: read its new tail files", t.FullName())
	}
	for _, tl := range tails {
		if len(tl.measured) == 0 {
			continue
		}
		out := tl.files[:0]
		for _, f := range tl.files {
			if slices.Contains(tl.measured, f.Key) {
				r, ok := rows[f.Key]
				if !ok {
					// Collected in between (it expired): measure again at the next load.
					return apierr.New(apierr.Unavailable, "load table %s: tail file %s vanished while the load was made; load again", t.FullName(), f.Key)
				}
				f = r
			}
			if f.Records > 0 {
				out = append(out, f)
			}
		}
		tl.files = out
	}
	return nil
}

// dataKey is the key of the data file of an indexed range.
func dataKey(t tables.Table, p int32, start, end int64, sha string) string {
	return layout.DataKey(t.Namespace, t.Name, p, start, end, sha)
}
