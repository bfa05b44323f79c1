package writer

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/tables"
)

// watch runs w's WatchProblems, as the writer role does, until the test ends.
func (f *fixture) watch(w *Writer) {
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.WatchProblems(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// unreadable are the listed snapshots of v that name a data file that cannot be
// served, with such a file of each.
func (f *fixture) unreadable(v view) map[int64]string {
	f.t.Helper()
	out := map[int64]string{}
	known := map[string]bool{}
	for _, s := range v.md.Snapshots() {
		es, err := v.entries(&s)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, e := range es {
			key, _ := layout.KeyOf(e.DataFile().FilePath())
			ok, seen := known[key]
			if !seen {
				ok = f.readable(key)
				known[key] = ok
			}
			if !ok {
				out[s.SnapshotID] = key
				break
			}
		}
	}
	return out
}

func listed(v view, id int64) bool { return v.md.SnapshotByID(id) != nil }

// A file server reports one compacted file while the maintenance is an hour away: the
// writer hears of it at once (WatchProblems) and repairs within seconds, not at the
// maintenance. Kafka compacts a partition as a whole, so the same round checks the
// partition's other files, those only older snapshots name too (assembled), and
// replaces every current one that changed, not only the reported one. Its commit expires
// every snapshot that names a file Kafka no longer yields: each snapshot listed
// afterwards can be read.
func TestRepairAtOnceWhenReported(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, tier string }{{"ranges", "64"}, {"assembled", "2"}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 1, map[string]string{PropMaintenanceInterval: "1h", PropAssemblyTierFiles: c.tier})
			f.compacted()
			w := f.newWriter()
			f.watch(w)
			f.run(w, f.take("writer", -1, "w1"))
			// Keys k0..k19 at [0, 20), committed; then k0..k4 again at [20, 25) and k0 at 25:
			// once compacted, offsets 0..4 are gone.
			f.produce(0, 20)
			f.index(0, 3)
			first := f.waitCovered().md.CurrentSnapshot().SnapshotID
			f.produce(0, 5)
			f.produce(0, 1)
			f.index(0, 3)
			before := f.waitCovered()
			if c.tier == "2" {
				leasetest.Eventually(t, 20*time.Second, "an assembly snapshot", func() bool {
					before = f.view()
					return slices.ContainsFunc(before.md.Snapshots(), func(s table.Snapshot) bool {
						return s.Summary.Properties[SummaryAssembledFiles] != ""
					})
				})
			}
			if u := f.unreadable(before); len(u) != 0 {
				t.Fatalf("before compaction, snapshots name unreadable files: %v", u)
			}
			f.kafka.Compact()
			var bad []string
			for _, fl := range before.files[0] {
				if !f.readable(fl.key) {
					bad = append(bad, fl.key)
				}
			}
			if len(bad) < 2 && c.tier == "64" || len(bad) == 0 {
				t.Fatalf("current files changed by compaction: %v", bad)
			}
			reported := time.Now()
			if err := objects.ReportProblem(f.ctx, f.db, bad[0], f.tbl.ID, "mismatch", "test report", "fs-test"); err != nil {
				t.Fatal(err)
			}
			var v view
			leasetest.Eventually(t, 15*time.Second, "every listed snapshot readable and no problem left", func() bool {
				v = f.view()
				return len(f.problemKeys(f.tbl.ID)) == 0 && len(f.unreadable(v)) == 0 && !slices.Contains(keysOfFiles(v.files[0]), bad[0])
			})
			t.Logf("repaired %v after the report; %d snapshots listed", time.Since(reported).Round(time.Millisecond), len(v.md.Snapshots()))
			f.checkExact(v)
			for _, k := range bad {
				if slices.Contains(keysOfFiles(v.files[0]), k) {
					t.Errorf("the current snapshot still names %s, which compaction changed (not reported: a suspect of the same round)", k)
				}
			}
			if listed(v, first) || listed(v, before.md.CurrentSnapshot().SnapshotID) {
				t.Errorf("snapshots from before the compaction are still listed: %d %v, %d %v", first, listed(v, first),
					before.md.CurrentSnapshot().SnapshotID, listed(v, before.md.CurrentSnapshot().SnapshotID))
			}
			if c.tier == "64" {
				if s := v.md.CurrentSnapshot().Summary; s.Properties[SummaryRepairedFiles] != strconv.Itoa(len(bad)) {
					t.Errorf("one repair round replaces the %d changed files: %v", len(bad), s)
				}
			}
		})
	}
}

// Retention deletes offsets that listed snapshots name: the commit that removes the
// files from the current snapshot also expires every snapshot naming one, whether a
// file server's report prompts it (at once, the maintenance an hour away) or the
// maintenance finds it.
func TestRetentionExpiresUnreadableSnapshots(t *testing.T) {
	t.Parallel()
	for _, reported := range []bool{true, false} {
		t.Run("reported="+strconv.FormatBool(reported), func(t *testing.T) {
			maint := "30ms"
			if reported {
				maint = "1h"
			}
			f := newFixture(t, 1, map[string]string{PropMaintenanceInterval: maint})
			w := f.newWriter()
			f.watch(w)
			f.run(w, f.take("writer", -1, "w1"))
			f.produce(0, 20)
			f.index(0, 10)
			first := f.waitCovered().md.CurrentSnapshot().SnapshotID
			f.produce(0, 20)
			f.index(0, 10)
			before := f.waitCovered()
			f.deleteRecords(map[int32]int64{0: 15})
			if reported {
				if err := objects.ReportProblem(f.ctx, f.db, before.files[0][0].key, f.tbl.ID, "offsets_gone", "test report", "fs-test"); err != nil {
					t.Fatal(err)
				}
			}
			var v view
			leasetest.Eventually(t, 15*time.Second, "the deleted offsets expired", func() bool {
				v = f.view()
				return v.cover[0].Start == 15 && len(f.problemKeys(f.tbl.ID)) == 0
			})
			f.checkExact(v)
			if u := f.unreadable(v); len(u) != 0 {
				t.Fatalf("listed snapshots name files below the log start: %v", u)
			}
			if listed(v, first) || listed(v, before.md.CurrentSnapshot().SnapshotID) {
				t.Fatalf("snapshots naming offsets below the log start are listed")
			}
		})
	}
}

// The writer's listener survives Postgres going away and coming back (the seed's
// failure table: every node resumes without a restart): it listens again, tells every
// table it writes then (reports made meanwhile), and from then on each report of one of
// its tables reaches that table's worker only. It stops with its context.
func TestWatchProblemsAcrossPostgresRestart(t *testing.T) {
	t.Parallel()
	pg, db := privateDB(t)
	f := newFixtureDB(t, db, 1, nil)
	ctx := f.ctx
	w, err := New(Options{DB: db, Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	other, err := tables.Create(ctx, db, tables.Table{Name: "other", Topic: topic, Spec: f.tbl.Spec}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var held []*heldTable
	for _, tb := range []tables.Table{f.tbl, other} {
		ht := &heldTable{table: tb.FullName(), id: tb.ID, reported: make(chan struct{}, 1)}
		w.held.Store(lease.Scope{Kind: lease.KindWriter, Table: tb.ID, Partition: -1}, ht)
		held = append(held, ht)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.WatchProblems(wctx) }()
	told := func(ht *heldTable, within time.Duration) bool {
		select {
		case <-ht.reported:
			return true
		case <-time.After(within):
			return false
		}
	}
	for i, ht := range held {
		if !told(ht, 10*time.Second) {
			t.Fatalf("table %d not told when the watch started listening", i)
		}
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	for i, ht := range held {
		if !told(ht, 15*time.Second) {
			t.Fatalf("table %d not told when the watch listened again after Postgres restarted", i)
		}
	}
	db.Reset() // the test's own statements should not meet connections the restart cut
	if err := objects.ReportProblem(ctx, db, "default/other/data/f.parquet", held[1].id, "mismatch", "test", "fs-1"); err != nil {
		t.Fatal(err)
	}
	if !told(held[1], 10*time.Second) {
		t.Fatal("a report after the restart did not reach its table's worker")
	}
	if told(held[0], 300*time.Millisecond) {
		t.Fatal("another table's report reached the fixture's table")
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WatchProblems: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchProblems did not stop with its context")
	}
}
