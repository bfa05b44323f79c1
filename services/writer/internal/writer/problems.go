package writer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tables"
)

// Summary keys of a snapshot that replaced files the file servers reported because Kafka
// no longer yields their recorded bytes (invariant 3).
const (
	SummaryRepairedFiles   = "mink.repair.replaced-files"   // reported files removed
	SummaryRepairedRecords = "mink.repair.replaced-records" // the rows they held
	SummaryRebuiltFiles    = "mink.repair.rebuilt-files"    // files rebuilt from what Kafka holds now for the same offsets
	SummaryRebuiltRecords  = "mink.repair.rebuilt-records"  // their rows; a file whose offsets hold no row now has none
)

// maxRepairFiles bounds the files one repair round rebuilds (so does roundBudget target
// sizes of bytes); the others wait for the next round, which follows at once.
const maxRepairFiles = 100

// fileProblem is a row of mink_file_problems: a file server could not serve Key with its
// recorded bytes. Reports is the count read: a clear leaves a row reported again since.
type fileProblem = objects.Problem

// repairOutcome is what rebuilding a reported file found.
type repairOutcome string

const (
	repairRebuilt    repairOutcome = "rebuilt"    // Kafka yields other bytes: replaced by them
	repairEmptied    repairOutcome = "emptied"    // Kafka holds no row of its offsets now: dropped
	repairGone       repairOutcome = "expired"    // offsets below Kafka's log start: expiry's
	repairIntact     repairOutcome = "intact"     // it rebuilds with its recorded bytes: nothing to replace
	repairStale      repairOutcome = "stale"      // no snapshot of the metadata names it
	repairUnreadable repairOutcome = "unreadable" // only older snapshots name it, and it no longer rebuilds: they are expired
)

// repair is one file to check (reported, or suspect: see startRepairs) and what
// rebuilding it found.
type repair struct {
	problem  fileProblem // the report, if any
	reported bool
	current  bool // the current snapshot names it; else only older ones do
	old      icebergmeta.DataFile
	outcome  repairOutcome
	new      icebergmeta.DataFile // repairRebuilt: the file of what Kafka holds now
	// rederived are, for an upsert table, the file's ranges as Kafka holds them now
	// (their keys give the new file's deletes and those of the files before it).
	rederived []ranges.Range
}

// startRepairs handles the table's file problems (rows file servers write when a rebuilt
// file differs from its recorded size and checksum, or its offsets are gone): it runs at
// each maintenance, and at once when a file server reports one (WatchProblems).
// Problems of files no snapshot of the metadata names (replaced and expired since,
// live-load tail files) are deleted. The files of the others are rebuilt from Kafka
// beside the loop, which commits the result when it arrives (commitRepairs). Kafka
// compacts a partition's log as a whole, so a file found compacted makes every other
// file of its partition that a snapshot names a suspect, checked in the same round (and
// the next ones, within their budget): the repair makes every listed snapshot readable
// at once rather than file by file as reads find them. One round runs at a time; a
// report during a round, or a round cut by its budget, starts the next one after it.
func (tw *tableWriter) startRepairs(ctx context.Context) error {
	if tw.repairing {
		tw.repairDue = true
		return nil
	}
	tw.repairDue = false
	ps, err := tw.problems(ctx)
	if err != nil || len(ps) == 0 && len(tw.suspects) == 0 {
		return err
	}
	older, err := tw.olderFiles(ctx)
	if err != nil {
		return err
	}
	named := map[string]fileProblem{}
	var stale []fileProblem
	for _, p := range ps {
		if _, ok := older[p.Key]; ok || tw.st.keys[p.Key] {
			named[p.Key] = p
		} else {
			stale = append(stale, p)
		}
	}
	if err := tw.clearProblems(ctx, repairStale, stale); err != nil {
		return err
	}
	var todo, suspect []repair
	check := func(f icebergmeta.DataFile, current bool) {
		p, ok := named[f.Key]
		switch {
		case ok:
			todo = append(todo, repair{problem: p, reported: true, current: current, old: f})
			if p.Reason == "mismatch" && !f.IsDeletes() && !tw.suspects[f.Partition] {
				// A new compaction: what rebuilt as recorded before may not now.
				tw.suspects[f.Partition] = true
				maps.DeleteFunc(tw.verified, func(_ string, p int32) bool { return p == f.Partition })
			}
		case !f.IsDeletes():
			if _, ok := tw.verified[f.Key]; ok {
				return
			}
			suspect = append(suspect, repair{current: current, old: f})
		}
	}
	for _, fs := range tw.st.live {
		for _, f := range fs {
			check(f, true)
		}
	}
	for _, f := range older {
		check(f, false)
	}
	suspect = slices.DeleteFunc(suspect, func(r repair) bool { return !tw.suspects[r.old.Partition] })
	byKey := func(a, b repair) int {
		if a.current != b.current {
			if a.current {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.old.Key, b.old.Key)
	}
	slices.SortFunc(todo, byKey)
	slices.SortFunc(suspect, byKey)
	todo = append(todo, suspect...)
	if len(todo) == 0 {
		clear(tw.suspects)
		clear(tw.verified)
		return nil
	}
	var size int64
	for i, r := range todo {
		if i > 0 && (i >= maxRepairFiles || size+r.old.Size > roundBudget*tw.cfg.assemblyTarget) {
			todo = todo[:i]
			tw.repairDue = true // the rest in the next round
			break
		}
		size += r.old.Size
	}
	if !tw.repairDue {
		clear(tw.suspects) // all of them checked in this round
		clear(tw.verified)
	}
	tw.repairing = true
	kc, codecs, tbl, log, db, keys := tw.w.kafka, tw.w.codecs, tw.tbl, tw.log, tw.w.db, tw.w.keys
	tw.wg.Add(1)
	go func() {
		defer tw.wg.Done()
		out := make([]repair, 0, len(todo))
	build:
		for _, r := range todo {
			f := r.old
			var nf icebergmeta.DataFile
			var err error
			if f.IsDeletes() {
				nf, err = buildDeletes(ctx, db, keys, tbl, f)
			} else {
				nf, err = buildFile(ctx, kc, codecs, tbl, f.Partition, f.Start, f.End, f.Settings)
			}
			same := err == nil && nf.Size == f.Size && nf.SHA256 == f.SHA256
			if err == nil && !same && r.current && tbl.Upsert() {
				r.rederived, err = rederive(ctx, db, kc, codecs, tbl, f)
			}
			switch {
			case errors.Is(err, kafkasrc.ErrOffsetsGone):
				r.outcome = repairGone
			case err != nil:
				if ctx.Err() != nil {
					break build
				}
				log.Warn("cannot rebuild a reported or suspect file; retrying at the next maintenance",
					"partition", f.Partition, "file", f.Key, "start_offset", f.Start, "end_offset", f.End, "error", err)
				continue
			case same:
				r.outcome = repairIntact
			case !r.current:
				r.outcome = repairUnreadable
			case nf.Records == 0:
				r.outcome = repairEmptied
			default:
				r.outcome, r.new = repairRebuilt, nf
			}
			out = append(out, r)
		}
		tw.repairDone <- out // buffered: the loop may have stopped
	}()
	return nil
}

// buildDeletes builds a position delete file from the index as it is now, into nothing,
// to measure it.
func buildDeletes(ctx context.Context, db pg.DB, keys *rangefile.KeyCache, t tables.Table, f icebergmeta.DataFile) (icebergmeta.DataFile, error) {
	var s parquetbuild.Settings
	if err := json.Unmarshal(f.Settings, &s); err != nil {
		return icebergmeta.DataFile{}, fmt.Errorf("bad recorded settings: %w", err)
	}
	fs, err := rangefile.BuildDeletes(ctx, db, keys, rangefile.Deletes{Table: t.ID, Partition: f.Partition, Start: f.Start, End: f.End,
		DataKey: f.DeletesOf, CoverEnd: f.CoverEnd}, s, io.Discard)
	if err != nil {
		return icebergmeta.DataFile{}, err
	}
	nf := f
	nf.Size, nf.SHA256, nf.Records = fs.Size, fs.SHA256, fs.RowCount
	return nf, nil
}

// commitRepairs commits a repair round. Files whose offsets Kafka deleted go through
// expiry with the log start offsets as they are now (dropped, or replaced by their
// retained part). The others are replaced by their rebuilds, or dropped if their offsets
// hold no row any more, in one overwrite (or delete) snapshot that keeps the coverage:
// every row Kafka still holds stays in the table exactly once. The same commit expires
// every snapshot that names a replaced file, or a file only older snapshots name that
// no longer rebuilds (a metadata-only commit when nothing is replaced). The problem rows
// of those files are deleted in its transaction (store); those of files that rebuild with
// their recorded bytes are just deleted. Files that left the table meanwhile (expiry,
// assembly) are skipped: their problems went with them.
func (tw *tableWriter) commitRepairs(ctx context.Context, rs []repair) error {
	named := func(r repair) bool { return tw.st.keys[r.old.Key] }
	if slices.ContainsFunc(rs, func(r repair) bool { return r.outcome == repairGone && r.current && named(r) }) {
		offs, err := tw.w.kafka.Offsets(ctx, tw.tbl.Topic)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			tw.log.Warn("cannot read Kafka's log start offsets to expire reported files; retrying at the next maintenance", "error", err)
		} else {
			for _, o := range offs {
				tw.logStart[o.Partition] = o.LogStart
			}
			if err := tw.expireFiles(ctx, offs); err != nil {
				return err
			}
		}
	}
	var add, remove []icebergmeta.DataFile
	var rederived []ranges.Range
	var intact, resolved []fileProblem // resolved: of files only older snapshots name, which go with them
	bad := map[string]bool{}
	var expired, emptied, unreadable int64
	for _, r := range rs {
		if r.outcome == repairIntact {
			if tw.suspects[r.old.Partition] { // the next round checks the rest
				tw.verified[r.old.Key] = r.old.Partition
			}
			if r.reported {
				tw.log.Warn("a reported file rebuilds with its recorded bytes; clearing the report",
					"partition", r.old.Partition, "file", r.old.Key, "reason", r.problem.Reason, "detail", r.problem.Detail)
				intact = append(intact, r.problem)
			}
			continue
		}
		if !named(r) {
			// Only older snapshots name it (now: expiry or assembly may have replaced
			// it meanwhile), and it cannot be read: they go.
			if r.outcome == repairGone && r.current {
				expired++
			}
			bad[r.old.Key] = true
			unreadable++
			if r.reported {
				resolved = append(resolved, r.problem)
			}
			continue
		}
		switch r.outcome {
		case repairGone:
			tw.log.Warn("a reported file's offsets are gone from Kafka and expiry has not removed it yet; retrying at the next maintenance",
				"partition", r.old.Partition, "file", r.old.Key, "start_offset", r.old.Start, "log_start", tw.logStart[r.old.Partition])
		case repairEmptied:
			remove = append(remove, r.old)
			rederived = append(rederived, r.rederived...)
			emptied++
		case repairRebuilt:
			remove = append(remove, r.old)
			add = append(add, r.new)
			rederived = append(rederived, r.rederived...)
		}
	}
	tw.w.m.repaired.Add(ctx, expired, tw.outcome(repairGone))
	if err := tw.clearProblems(ctx, repairIntact, intact); err != nil {
		return err
	}
	for _, f := range remove {
		bad[f.Key] = true
	}
	expire, err := tw.unreadable(ctx, bad, nil)
	if err != nil {
		return err
	}
	if len(remove) == 0 && len(expire) == 0 {
		// No snapshot names them any more: nothing to expire.
		return tw.clearProblems(ctx, repairStale, resolved)
	}
	now, err := tw.dbNow(ctx)
	if err != nil {
		return err
	}
	if len(remove) == 0 {
		res, err := tw.expireOnly(ctx, now, expire, keysOfProblems(resolved))
		switch {
		case errors.Is(err, icebergmeta.ErrNoChange): // no snapshot names them any more
			return tw.clearProblems(ctx, repairStale, resolved)
		case errors.Is(err, errNotBuilt):
			return nil // the problems stay for the next round
		case err != nil:
			return err
		}
		tw.w.m.repaired.Add(ctx, unreadable, tw.outcome(repairUnreadable))
		tw.log.Info("expired snapshots naming files Kafka no longer yields", "snapshots", len(res.Expired), "files", unreadable, "version", res.Version)
		return nil
	}
	op := table.OpOverwrite
	if len(add) == 0 {
		op = table.OpDelete
	}
	var removed, rebuilt int64
	for _, f := range remove {
		removed += f.Records
	}
	for _, f := range add {
		rebuilt += f.Records
	}
	res, err := tw.commit(ctx, icebergmeta.Change{
		Operation: op, Add: add, Remove: remove, Now: now, Expire: expire,
		Summary: map[string]string{
			SummaryRepairedFiles: strconv.Itoa(len(remove)), SummaryRepairedRecords: strconv.FormatInt(removed, 10),
			SummaryRebuiltFiles: strconv.Itoa(len(add)), SummaryRebuiltRecords: strconv.FormatInt(rebuilt, 10),
		},
	}, rederived...)
	if err != nil {
		return err
	}
	if err := tw.store(ctx, string(op), res, add, remove, keysOfProblems(resolved)...); err != nil {
		return err
	}
	tw.st.apply(add, remove)
	tw.w.m.filesAdded.Add(ctx, int64(len(add)), tw.attrs)
	tw.w.m.filesRemoved.Add(ctx, int64(len(remove)), tw.attrs)
	tw.w.m.repaired.Add(ctx, int64(len(add)), tw.outcome(repairRebuilt))
	tw.w.m.repaired.Add(ctx, emptied, tw.outcome(repairEmptied))
	tw.w.m.repaired.Add(ctx, unreadable, tw.outcome(repairUnreadable))
	for _, r := range rs {
		if r.outcome == repairRebuilt || r.outcome == repairEmptied {
			tw.log.Info("replaced a file whose recorded bytes Kafka no longer yields", "partition", r.old.Partition,
				"file", r.old.Key, "start_offset", r.old.Start, "end_offset", r.old.End, "reported", r.reported, "reason", r.problem.Reason, "detail", r.problem.Detail,
				"outcome", string(r.outcome), "records", r.old.Records, "new_file", r.new.Key, "new_records", r.new.Records, "version", res.Version)
		}
	}
	return nil
}

// keysOfProblems are the keys of ps.
func keysOfProblems(ps []fileProblem) []string {
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.Key
	}
	return keys
}

// problems reads the table's file problems.
func (tw *tableWriter) problems(ctx context.Context) ([]fileProblem, error) {
	return objects.Problems(ctx, tw.w.db, tw.l.Table)
}

// clearProblems deletes problem rows that need no replacement, under the lease and only
// if the current metadata is still the one that showed it (fencedAtVersion). A row
// reported again since it was read (its report count moved) stays for the next round.
func (tw *tableWriter) clearProblems(ctx context.Context, why repairOutcome, ps []fileProblem) error {
	if len(ps) == 0 {
		return nil
	}
	if tw.w.beforeStore != nil {
		tw.w.beforeStore(ctx, "clear-problems")
	}
	var n int64
	err := tw.fencedAtVersion(ctx, func(tx pgx.Tx) error {
		var err error
		n, err = objects.ClearProblems(ctx, tx, tw.l.Table, ps)
		return err
	})
	if err != nil {
		return fmt.Errorf("clear %s file problems: %w", why, err)
	}
	tw.w.m.repaired.Add(ctx, n, tw.outcome(why))
	tw.log.Info("cleared file problems that need no replacement", "outcome", string(why), "problems", n)
	return nil
}

func (tw *tableWriter) outcome(o repairOutcome) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("table", tw.tbl.FullName()), attribute.String("outcome", string(o)))
}

// keysOf is the keys of fs.
func keysOf(fs []icebergmeta.DataFile) []string {
	keys := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = f.Key
	}
	return keys
}
