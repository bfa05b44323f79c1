package writer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/services/writer/internal/store"
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
// sizes of bytes); the others wait for the next maintenance.
const maxRepairFiles = 100

// fileProblem is a row of mink_file_problems: a file server could not serve Key with its
// recorded bytes. Reports is the count read: a clear leaves a row reported again since.
type fileProblem = store.Problem

// repairOutcome is what rebuilding a reported file found.
type repairOutcome string

const (
	repairRebuilt repairOutcome = "rebuilt" // Kafka yields other bytes: replaced by them
	repairEmptied repairOutcome = "emptied" // Kafka holds no row of its offsets now: dropped
	repairGone    repairOutcome = "expired" // offsets below Kafka's log start: expiry's
	repairIntact  repairOutcome = "intact"  // it rebuilds with its recorded bytes: nothing to replace
	repairStale   repairOutcome = "stale"   // the current snapshot does not name it
)

// repair is one reported file of the current snapshot and what rebuilding it found.
type repair struct {
	problem fileProblem
	old     icebergmeta.DataFile
	outcome repairOutcome
	new     icebergmeta.DataFile // repairRebuilt: the file of what Kafka holds now
	// rederived are, for an upsert table, the file's ranges as Kafka holds them now
	// (their keys give the new file's deletes and those of the files before it).
	rederived []ranges.Range
}

// startRepairs handles the table's file problems (rows file servers write when a rebuilt
// file differs from its recorded size and checksum, or its offsets are gone). Problems of
// files the current snapshot does not name (replaced or dropped since, live-load tail
// files, files of older snapshots only) are deleted. The files of the others are rebuilt
// from Kafka beside the loop, which commits the result when it arrives (commitRepairs).
// One round runs at a time.
func (tw *tableWriter) startRepairs(ctx context.Context) error {
	if tw.repairing {
		return nil
	}
	ps, err := tw.problems(ctx)
	if err != nil || len(ps) == 0 {
		return err
	}
	named := map[string]fileProblem{}
	var stale []fileProblem
	for _, p := range ps {
		if tw.st.keys[p.Key] {
			named[p.Key] = p
		} else {
			stale = append(stale, p)
		}
	}
	if err := tw.clearProblems(ctx, repairStale, stale); err != nil {
		return err
	}
	var todo []repair
	for _, fs := range tw.st.live {
		for _, f := range fs {
			if p, ok := named[f.Key]; ok {
				todo = append(todo, repair{problem: p, old: f})
			}
		}
	}
	if len(todo) == 0 {
		return nil
	}
	slices.SortFunc(todo, func(a, b repair) int { return cmp.Compare(a.old.Key, b.old.Key) })
	var size int64
	for i, r := range todo {
		if i > 0 && (i >= maxRepairFiles || size+r.old.Size > roundBudget*tw.cfg.assemblyTarget) {
			todo = todo[:i]
			break
		}
		size += r.old.Size
	}
	tw.repairing = true
	kc, codecs, tbl, log, db := tw.w.kafka, tw.w.codecs, tw.tbl, tw.log, tw.w.db
	tw.wg.Add(1)
	go func() {
		defer tw.wg.Done()
		out := make([]repair, 0, len(todo))
	build:
		for _, r := range todo {
			f := r.old
			nf, err := buildFile(ctx, kc, codecs, tbl, f.Partition, f.Start, f.End, f.Settings)
			if err == nil && tbl.Upsert() && (nf.Size != f.Size || nf.SHA256 != f.SHA256) {
				r.rederived, err = rederive(ctx, db, kc, codecs, tbl, f)
			}
			switch {
			case errors.Is(err, kafkasrc.ErrOffsetsGone):
				r.outcome = repairGone
			case err != nil:
				if ctx.Err() != nil {
					break build
				}
				log.Warn("cannot rebuild a reported file; retrying at the next maintenance",
					"partition", f.Partition, "file", f.Key, "start_offset", f.Start, "end_offset", f.End, "error", err)
				continue
			case nf.Size == f.Size && nf.SHA256 == f.SHA256:
				r.outcome = repairIntact
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

// commitRepairs commits a repair round. Files whose offsets Kafka deleted go through
// expiry with the log start offsets as they are now (dropped, or replaced by their
// retained part). The others are replaced by their rebuilds, or dropped if their offsets
// hold no row any more, in one overwrite (or delete) snapshot that keeps the coverage:
// every row Kafka still holds stays in the table exactly once. The problem rows of the
// files a snapshot removes are deleted in its commit's transaction (store); those of
// files that rebuild with their recorded bytes are just deleted. Files that left the
// table meanwhile (expiry, assembly) are skipped: their problems went with them.
func (tw *tableWriter) commitRepairs(ctx context.Context, rs []repair) error {
	named := func(r repair) bool { return tw.st.keys[r.old.Key] }
	if slices.ContainsFunc(rs, func(r repair) bool { return r.outcome == repairGone && named(r) }) {
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
	var intact []fileProblem
	var expired, emptied int64
	for _, r := range rs {
		if !named(r) {
			if r.outcome == repairGone {
				expired++
			}
			continue
		}
		switch r.outcome {
		case repairGone:
			tw.log.Warn("a reported file's offsets are gone from Kafka and expiry has not removed it yet; retrying at the next maintenance",
				"partition", r.old.Partition, "file", r.old.Key, "start_offset", r.old.Start, "log_start", tw.logStart[r.old.Partition])
		case repairIntact:
			tw.log.Warn("a reported file rebuilds with its recorded bytes; clearing the report",
				"partition", r.old.Partition, "file", r.old.Key, "reason", r.problem.Reason, "detail", r.problem.Detail)
			intact = append(intact, r.problem)
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
	if len(remove) == 0 {
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
	now, err := tw.dbNow(ctx)
	if err != nil {
		return err
	}
	res, err := tw.commit(ctx, icebergmeta.Change{
		Operation: op, Add: add, Remove: remove, Now: now,
		Summary: map[string]string{
			SummaryRepairedFiles: strconv.Itoa(len(remove)), SummaryRepairedRecords: strconv.FormatInt(removed, 10),
			SummaryRebuiltFiles: strconv.Itoa(len(add)), SummaryRebuiltRecords: strconv.FormatInt(rebuilt, 10),
		},
	}, rederived...)
	if err != nil {
		return err
	}
	if err := tw.store(ctx, string(op), res, add, remove); err != nil {
		return err
	}
	tw.st.apply(add, remove)
	tw.w.m.filesAdded.Add(ctx, int64(len(add)), tw.attrs)
	tw.w.m.filesRemoved.Add(ctx, int64(len(remove)), tw.attrs)
	tw.w.m.repaired.Add(ctx, int64(len(add)), tw.outcome(repairRebuilt))
	tw.w.m.repaired.Add(ctx, emptied, tw.outcome(repairEmptied))
	for _, r := range rs {
		if r.outcome == repairRebuilt || r.outcome == repairEmptied {
			tw.log.Info("replaced a file whose recorded bytes Kafka no longer yields", "partition", r.old.Partition,
				"file", r.old.Key, "start_offset", r.old.Start, "end_offset", r.old.End, "reason", r.problem.Reason, "detail", r.problem.Detail,
				"outcome", string(r.outcome), "records", r.old.Records, "new_file", r.new.Key, "new_records", r.new.Records, "version", res.Version)
		}
	}
	return nil
}

// problems reads the table's file problems.
func (tw *tableWriter) problems(ctx context.Context) ([]fileProblem, error) {
	return store.Problems(ctx, tw.w.db, tw.l.Table)
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
		n, err = store.ClearProblems(ctx, tx, tw.l.Table, ps)
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
