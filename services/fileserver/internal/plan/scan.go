package plan

// Planning itself is iceberg-go's: the table's metadata, its manifests read from
// Postgres, and iceberg-go's scan (partition pruning by manifest summaries and
// partition values, then pruning by each file's column bounds and counts, and each
// task's residual), the very planning an engine would do for itself with the same
// metadata. This file turns a request into a scanKey and a scanKey into files.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/tables"
)

// request is the spec's PlanTableScanRequest.
type request struct {
	SnapshotID        *int64          `json:"snapshot-id"`
	Select            []string        `json:"select"`
	Filter            json.RawMessage `json:"filter"`
	MinRowsRequested  *int64          `json:"min-rows-requested"` // a hint; every matching file is planned
	CaseSensitive     *bool           `json:"case-sensitive"`
	UseSnapshotSchema *bool           `json:"use-snapshot-schema"`
	StartSnapshotID   *int64          `json:"start-snapshot-id"`
	EndSnapshotID     *int64          `json:"end-snapshot-id"`
	StatsFields       []string        `json:"stats-fields"`
}

// parseRequest reads a request body (empty: plan everything of the current snapshot).
func parseRequest(body []byte) (request, error) {
	var req request
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return request{}, apierr.Invalid(te.Field, "a %s is not a valid value here (want %s)", te.Value, te.Type)
		}
		return request{}, apierr.New(apierr.InvalidArgument, "the body is not a PlanTableScanRequest (a JSON object): %s", clip(err.Error()))
	}
	if dec.More() {
		return request{}, apierr.New(apierr.InvalidArgument, "the body has more than one JSON value")
	}
	switch {
	case req.SnapshotID != nil && (req.StartSnapshotID != nil || req.EndSnapshotID != nil):
		return request{}, apierr.Invalid("snapshot-id", "a scan is point-in-time (snapshot-id) or incremental (start-snapshot-id, end-snapshot-id), not both")
	case req.StartSnapshotID != nil && req.EndSnapshotID == nil:
		return request{}, apierr.Invalid("end-snapshot-id", "is required with start-snapshot-id")
	case req.MinRowsRequested != nil && *req.MinRowsRequested < 0:
		return request{}, apierr.Invalid("min-rows-requested", "is negative")
	}
	return req, nil
}

// snapshots are the snapshot ids a request names.
func (req request) snapshots() []int64 {
	var out []int64
	for _, id := range []*int64{req.SnapshotID, req.StartSnapshotID, req.EndSnapshotID} {
		if id != nil {
			out = append(out, *id)
		}
	}
	return out
}

// source is what a plan is made from: one metadata file of a table.
type source struct {
	table tables.Table
	key   string
	md    table.Metadata
}

func newSource(t tables.Table, key string, content []byte) (source, error) {
	md, err := table.ParseMetadataBytes(content)
	if err != nil {
		return source{}, fmt.Errorf("table %s: metadata %s: %w", t.FullName(), key, err)
	}
	return source{table: t, key: key, md: md}, nil
}

// has reports whether every snapshot in ids is in the source's metadata.
func (s source) has(ids ...int64) bool {
	for _, id := range ids {
		if s.md.SnapshotByID(id) == nil {
			return false
		}
	}
	return true
}

// snapshotSchema is the schema snap was written with (the current one if it names none).
func snapshotSchema(md table.Metadata, snap *table.Snapshot) *iceberg.Schema {
	if snap != nil && snap.SchemaID != nil {
		if i := slices.IndexFunc(md.Schemas(), func(s *iceberg.Schema) bool { return s.ID == *snap.SchemaID }); i >= 0 {
			return md.Schemas()[i]
		}
	}
	return md.CurrentSchema()
}

// resolve makes the scanKey of req over src: the snapshots and schema it names, its
// filter as sent, and the ids of its stats-fields. Each mistake is InvalidArgument
// naming its field.
func resolve(req request, src source) (scanKey, error) {
	md := src.md
	k := scanKey{Table: src.table.ID, Metadata: src.key, CaseInsensitive: req.CaseSensitive != nil && !*req.CaseSensitive}
	missing := func(field string, id int64) error {
		return apierr.Invalid(field, "table %s has no snapshot %d: it may have expired, or been a live load's (a live load's snapshot is in the loads that named it, for about a minute)",
			src.table.FullName(), id)
	}
	names := md.CurrentSchema()
	snapshotNames := req.UseSnapshotSchema != nil && *req.UseSnapshotSchema
	switch {
	case req.EndSnapshotID != nil:
		end := md.SnapshotByID(*req.EndSnapshotID)
		if end == nil {
			return scanKey{}, missing("end-snapshot-id", *req.EndSnapshotID)
		}
		k.Start, k.End = req.StartSnapshotID, end.SnapshotID
		if snapshotNames {
			names = snapshotSchema(md, end)
		}
	case req.SnapshotID != nil:
		snap := md.SnapshotByID(*req.SnapshotID)
		if snap == nil {
			return scanKey{}, missing("snapshot-id", *req.SnapshotID)
		}
		k.Snapshot = snap.SnapshotID
		if snapshotNames {
			names = snapshotSchema(md, snap)
		}
	default:
		if snap := md.CurrentSnapshot(); snap != nil {
			k.Snapshot = snap.SnapshotID
		}
	}
	k.Schema = names.ID
	if len(bytes.TrimSpace(req.Filter)) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, req.Filter); err != nil {
			return scanKey{}, apierr.Invalid("filter", "not JSON: %s", clip(err.Error()))
		}
		if buf.String() != "null" {
			k.Filter = buf.Bytes()
		}
	}
	find := func(name string) (iceberg.NestedField, bool) {
		if k.CaseInsensitive {
			return names.FindFieldByNameCaseInsensitive(name)
		}
		return names.FindFieldByName(name)
	}
	for i, name := range req.Select {
		if _, ok := find(name); !ok {
			return scanKey{}, apierr.Invalid(fmt.Sprintf("select[%d]", i), "the table has no column %q", clip(name))
		}
	}
	for i, name := range req.StatsFields {
		f, ok := find(name)
		if !ok {
			return scanKey{}, apierr.Invalid(fmt.Sprintf("stats-fields[%d]", i), "the table has no column %q", clip(name))
		}
		if !slices.Contains(k.Stats, f.ID) {
			k.Stats = append(k.Stats, f.ID)
		}
	}
	slices.Sort(k.Stats)
	return k, nil
}

// planned is a plan made: its files, in path order, and how to write them.
type planned struct {
	src       source
	schema    *iceberg.Schema // the planning schema: the snapshot's
	filter    filter
	tasks     []table.FileScanTask
	stats     map[int]bool
	rawFilter json.RawMessage // the request's filter, the residual when filter is not exact
}

// errGone: what a replayed scanKey names is no longer in the metadata.
var errGone = errors.New("the plan's snapshot or schema is no longer in the table's metadata")

// scan plans k over src. The same k over the same metadata plans the same files.
func (p *Planner) scan(ctx context.Context, k scanKey, src source) (*planned, error) {
	md := src.md
	i := slices.IndexFunc(md.Schemas(), func(s *iceberg.Schema) bool { return s.ID == k.Schema })
	if i < 0 {
		return nil, errGone
	}
	names := md.Schemas()[i]
	out := &planned{src: src, rawFilter: k.Filter, stats: map[int]bool{}}
	for _, id := range k.Stats {
		out.stats[id] = true
	}
	endID := k.Snapshot
	if k.Snapshot == 0 {
		endID = k.End
	}
	if endID == 0 { // a table without snapshots: nothing to read
		out.schema, out.filter = md.CurrentSchema(), filter{expr: iceberg.AlwaysTrue{}, exact: true}
		return out, nil
	}
	snap := md.SnapshotByID(endID)
	if snap == nil {
		return nil, errGone
	}
	out.schema = snapshotSchema(md, snap)
	var err error
	if out.filter, err = parseFilter(k.Filter, names, out.schema, !k.CaseInsensitive); err != nil {
		return nil, err
	}
	store := objects.MetaStore(p.o.DB, src.table.ID, p.o.LookupTimeout)
	it := table.New(table.Identifier{src.table.Namespace, src.table.Name}, md, layout.URI(src.key),
		func(ctx context.Context) (iceio.IO, error) { return icebergmeta.FileIO(ctx, store), nil }, nil)
	// The names are the planning schema's now, so binding is case-sensitive.
	opts := []table.ScanOption{table.WithRowFilter(out.filter.expr), table.WithCaseSensitive(true), table.WithSnapshotID(endID)}
	var tasks []table.FileScanTask
	if k.Snapshot != 0 {
		tasks, err = it.Scan(opts...).PlanFiles(ctx)
	} else {
		inc := it.NewIncrementalAppendScan(opts...).ToSnapshot(k.End)
		if k.Start != nil {
			inc = inc.FromSnapshotExclusive(*k.Start)
		}
		tasks, err = inc.PlanFiles(ctx)
	}
	if err != nil {
		return nil, planErr(src.table, err)
	}
	// One task per file, in path order: batches are slices of this order, the same for
	// every server that replays the plan. (Mink's files name no split offsets, so
	// iceberg-go does not split them; a split would be one file twice here.)
	slices.SortFunc(tasks, func(a, b table.FileScanTask) int { return cmp.Compare(a.File.FilePath(), b.File.FilePath()) })
	out.tasks = slices.CompactFunc(tasks, func(a, b table.FileScanTask) bool { return a.File.FilePath() == b.File.FilePath() })
	return out, nil
}

// planErr says what went wrong planning a scan of t, in apierr's kinds.
func planErr(t tables.Table, err error) error {
	if errors.Is(err, iceberg.ErrInvalidArgument) {
		// iceberg-go's words about the snapshots asked for (not an ancestor, ...): the
		// request's own.
		return apierr.New(apierr.InvalidArgument, "%s", clip(err.Error()))
	}
	return apierr.Postgres(err, "plan a scan of table %s", t.FullName())
}

// residual is what a task's rows must still be filtered by, as JSON; nil: no filter.
func (pl *planned) residual(task table.FileScanTask, bound iceberg.BooleanExpression) json.RawMessage {
	if !pl.filter.set {
		return nil
	}
	if pl.filter.exact {
		r := task.Residual
		if r == nil {
			r = bound
		}
		if b, err := json.Marshal(r); err == nil {
			return b
		}
	}
	// The request's own filter: always a correct residual, in the client's own terms.
	return pl.rawFilter
}

// encode writes tasks of the plan.
func (pl *planned) encode(tasks []table.FileScanTask) ([]json.RawMessage, error) {
	var bound iceberg.BooleanExpression = iceberg.AlwaysTrue{}
	if pl.filter.set && pl.filter.exact {
		var err error
		if bound, err = iceberg.BindExpr(pl.schema, pl.filter.expr, true); err != nil {
			bound = nil // encoded as the request's filter
			pl.filter.exact = false
		}
	}
	out := make([]json.RawMessage, 0, len(tasks))
	for _, t := range tasks {
		b, err := encodeTask(pl.src.md, t, pl.stats, pl.residual(t, bound))
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", pl.src.table.FullName(), err)
		}
		out = append(out, b)
	}
	return out, nil
}
