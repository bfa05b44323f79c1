package writer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
)

// newCompactableFixture is a one-partition table over a compacted topic holding keys
// k0..k19 at offsets [0, 20), k0..k4 again at [20, 25) and k0 at 25 (the active batch,
// never compacted), indexed in ranges of 3 offsets: once compacted, offsets 0..4 are
// gone, so [0, 3) holds no row and [3, 6) one (offset 5).
func newCompactableFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, 1, nil)
	f.compacted()
	f.produce(0, 20)
	f.produce(0, 5)
	f.produce(0, 1)
	f.index(0, 3)
	return f
}

// compacted makes the fixture's topic a compacted one (kfake compacts it at Compact).
func (f *fixture) compacted() {
	f.t.Helper()
	resp, err := kadm.NewClient(f.kafka.Client()).AlterTopicConfigs(f.ctx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")}}, topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// compactAndReport compacts the topic and reports, as a file server does when a rebuild
// differs, every file of v whose rebuild no longer has its recorded bytes ([0, 3) and
// [3, 6)), and also the keys in more, all at once.
func (f *fixture) compactAndReport(v view, more ...string) []file {
	f.t.Helper()
	f.kafka.Compact()
	var bad []file
	for _, fl := range v.files[0] {
		if !f.readable(fl.key) {
			bad = append(bad, fl)
		}
	}
	if len(bad) != 2 || bad[0].start != 0 || bad[0].end != 3 || bad[1].start != 3 || bad[1].end != 6 {
		f.t.Fatalf("files whose rebuild differs after compaction: %v, want [0, 3) and [3, 6)", bad)
	}
	f.report(f.tbl.ID, "mismatch", append(keysOfFiles(bad), more...)...)
	return bad
}

// readable reports whether the data file of key can be served: it builds from Kafka
// with the size and checksum its mink_data_files row records (its offsets are still
// there, and hold the same records).
func (f *fixture) readable(key string) bool {
	f.t.Helper()
	r := ranges.Range{Table: f.tbl.ID}
	err := f.db.QueryRow(f.ctx, `SELECT partition, start_offset, end_offset, file_size, sha256, settings FROM mink_data_files WHERE key = $1`, key).
		Scan(&r.Partition, &r.Start, &r.End, &r.Size, &r.SHA256, &r.Settings)
	if err != nil {
		f.t.Fatalf("data file %s: %v", key, err)
	}
	_, err = rangefile.Build(f.ctx, f.src, tablecodec.New(f.db, nil), f.tbl, r, io.Discard)
	if err != nil && !errors.Is(err, rangefile.ErrMismatch) && !errors.Is(err, kafkasrc.ErrOffsetsGone) {
		f.t.Fatalf("rebuild %s: %v", key, err)
	}
	return err == nil
}

// report writes file problem rows as a file server does, in one transaction so that the
// writer sees all of them or none.
func (f *fixture) report(tableID int64, reason string, keys ...string) {
	f.t.Helper()
	err := pgx.BeginFunc(f.ctx, f.db, func(tx pgx.Tx) error {
		for _, key := range keys {
			_, err := tx.Exec(f.ctx, `INSERT INTO mink_file_problems (key, table_id, reason, detail, reported_by)
				VALUES ($1, $2, $3, $4, 'fs-test')
				ON CONFLICT (key) DO UPDATE SET reason = EXCLUDED.reason, detail = EXCLUDED.detail,
					reported_by = EXCLUDED.reported_by, last_seen = now(), reports = mink_file_problems.reports + 1`,
				key, tableID, reason, fmt.Sprintf("test report: %s", reason))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// problemKeys are the keys of the table's file problems.
func (f *fixture) problemKeys(tableID int64) []string {
	f.t.Helper()
	rows, _ := f.db.Query(f.ctx, `SELECT key FROM mink_file_problems WHERE table_id = $1 ORDER BY key`, tableID)
	var keys []string
	var k string
	if _, err := pgx.ForEachRow(rows, []any{&k}, func() error { keys = append(keys, k); return nil }); err != nil {
		f.t.Fatal(err)
	}
	return keys
}

func keysOfFiles(fs []file) []string {
	var ks []string
	for _, f := range fs {
		ks = append(ks, f.key)
	}
	slices.Sort(ks)
	return ks
}

// The topic is compacted after indexing, so two committed files no longer rebuild with
// their recorded bytes and a file server reports them. The writer replaces them: the
// file that still has a row by its rebuild under a new key, the one with none by
// nothing; every file the new snapshot names rebuilds as recorded, its rows are what
// Kafka holds now, the rest of the table is untouched and the problems are gone.
func TestRepairReplacesCompactedFiles(t *testing.T) {
	t.Parallel()
	f := newCompactableFixture(t)
	f.run(f.newWriter(), f.take("writer", -1, "w1"))
	before := f.waitCovered()
	f.checkExact(before)
	bad := f.compactAndReport(before)

	leasetest.Eventually(t, 20*time.Second, "the reported files replaced", func() bool {
		return len(f.problemKeys(f.tbl.ID)) == 0 // deleted in the repair's commit
	})
	v := f.view()
	f.checkExact(v)
	if v.cover[0] != before.cover[0] {
		t.Fatalf("coverage moved from %v to %v", before.cover[0], v.cover[0])
	}
	for _, fl := range v.files[0] {
		if slices.Contains(keysOfFiles(bad), fl.key) {
			t.Fatalf("the current snapshot still names reported file %s", fl.key)
		}
		if !f.readable(fl.key) {
			t.Fatalf("file %s of the current snapshot does not rebuild with its recorded bytes", fl.key)
		}
	}
	// [0, 3) holds no row now: dropped; [3, 6) holds offset 5 only; the rest as before.
	if fl := v.files[0][0]; fl.start != 3 || fl.end != 6 || fl.records != 1 || fl.key == bad[1].key {
		t.Fatalf("replacement of [3, 6): %+v", fl)
	}
	if got, want := keysOfFiles(v.files[0][1:]), keysOfFiles(before.files[0][2:]); !slices.Equal(got, want) {
		t.Fatalf("files after [3, 6): %v, want %v", got, want)
	}
	if offs := f.kafkaRows(0, 0, 6); !slices.Equal(offs, []int64{5}) {
		t.Fatalf("Kafka holds offsets %v of [0, 6), want [5]", offs)
	}
	s := v.md.CurrentSnapshot().Summary
	if s.Operation != table.OpOverwrite || s.Properties[SummaryRepairedFiles] != "2" || s.Properties[SummaryRepairedRecords] != "6" ||
		s.Properties[SummaryRebuiltFiles] != "1" || s.Properties[SummaryRebuiltRecords] != "1" {
		t.Fatalf("repair snapshot: %v", s)
	}
}

// Kafka deleted the offsets of reported files after the writer's last maintenance: the
// repair round finds it out by rebuilding, and hands the files to expiry with the log
// start as it is now. The file wholly below it is dropped, the one straddling it is
// replaced by its retained part, and both problems are gone with them.
func TestRepairDropsFilesWhoseOffsetsAreGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, nil)
	f.produce(0, 40)
	f.index(0, 10)
	w := f.newWriter()
	tw, err := w.open(f.ctx, f.take("writer", -1, "w1"), w.log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.commitNew(f.ctx); err != nil {
		t.Fatal(err)
	}
	before := f.view()
	f.checkExact(before)
	f.deleteRecords(map[int32]int64{0: 15})
	f.report(f.tbl.ID, "offsets_gone", keysOfFiles(before.files[0][:2])...) // [0, 10) and [10, 20)

	if err := tw.startRepairs(f.ctx); err != nil {
		t.Fatal(err)
	}
	rs := <-tw.repairDone
	tw.repairing = false
	if len(rs) != 2 || rs[0].outcome != repairGone || rs[1].outcome != repairGone {
		t.Fatalf("repairs: %+v", rs)
	}
	if err := tw.commitRepairs(f.ctx, rs); err != nil {
		t.Fatal(err)
	}
	tw.wg.Wait()

	v := f.view()
	f.checkExact(v)
	if keys := f.problemKeys(f.tbl.ID); len(keys) != 0 {
		t.Fatalf("problems left: %v", keys)
	}
	if v.cover[0].Start != 15 || v.cover[0].End != 40 {
		t.Fatalf("coverage %v, want [15, 40)", v.cover[0])
	}
	if fl := v.files[0][0]; fl.start != 15 || fl.end != 20 || fl.records != 5 {
		t.Fatalf("retained part of [10, 20): [%d, %d) %d rows", fl.start, fl.end, fl.records)
	}
	if got, want := keysOfFiles(v.files[0][1:]), keysOfFiles(before.files[0][2:]); !slices.Equal(got, want) {
		t.Fatalf("files from 20 on: %v, want %v", got, want)
	}
	s := v.md.CurrentSnapshot().Summary
	if s.Operation != table.OpOverwrite || s.Properties[SummaryDroppedFiles] != "2" || s.Properties[SummaryTailFiles] != "1" {
		t.Fatalf("expiry snapshot: %v", s)
	}
}

// Problems that need no replacement are only deleted: one for a key the current snapshot
// does not name, one for a file that rebuilds with its recorded bytes. The table stays
// as it is, and another table's problem is not the writer's.
func TestRepairClearsProblemsNeedingNoReplacement(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, nil)
	f.produce(0, 20)
	f.index(0, 10)
	other, err := tables.Create(f.ctx, f.db, tables.Table{Name: "other", Topic: topic, Spec: f.tbl.Spec}, 1)
	if err != nil {
		t.Fatal(err)
	}
	otherKey := layout.DataKey(other.Namespace, other.Name, 0, 0, 10, strings.Repeat("ab", 32))
	f.report(other.ID, "mismatch", otherKey)

	f.run(f.newWriter(), f.take("writer", -1, "w1"))
	before := f.waitCovered()
	version, _ := f.version()
	f.report(f.tbl.ID, "offsets_gone", layout.DataKey(f.tbl.Namespace, f.tbl.Name, 0, 0, 10, strings.Repeat("ab", 32)),
		before.files[0][1].key, before.files[0][1].key) // the second reported twice
	leasetest.Eventually(t, 20*time.Second, "the problems cleared", func() bool {
		return len(f.problemKeys(f.tbl.ID)) == 0
	})
	v := f.view()
	if v.version != version || !slices.Equal(keysOfFiles(v.files[0]), keysOfFiles(before.files[0])) {
		t.Fatalf("the table changed: version %d → %d, files %v → %v", version, v.version, keysOfFiles(before.files[0]), keysOfFiles(v.files[0]))
	}
	if keys := f.problemKeys(other.ID); !slices.Equal(keys, []string{otherKey}) {
		t.Fatalf("other table's problems: %v", keys)
	}
}

// A writer whose lease is taken just before it deletes problems or commits a repair
// changes nothing: the commit pointer, the data files and the problem rows stay as they
// were. The new holder then repairs the table.
func TestStaleWriterCannotRepair(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"clear-problems", string(table.OpOverwrite)} {
		t.Run(op, func(t *testing.T) {
			f := newCompactableFixture(t)
			var stolen lease.Lease
			var version int64
			var stealErr error
			w := f.newWriter()
			w.beforeStore = func(ctx context.Context, o string) {
				if o == op && stolen.Holder == "" {
					stealErr = f.db.QueryRow(ctx, `SELECT version FROM mink_table_meta WHERE table_id = $1`, f.tbl.ID).Scan(&version)
					stolen = f.take("writer", -1, "thief")
				}
			}
			_, done := f.run(w, f.take("writer", -1, "w1"))
			before := f.waitCovered()
			staleKey := layout.DataKey(f.tbl.Namespace, f.tbl.Name, 0, 0, 3, strings.Repeat("cd", 32))
			bad := f.compactAndReport(before, staleKey)
			select {
			case <-done: // Work returns once the lease is lost
			case <-time.After(20 * time.Second):
				t.Fatal("the stale writer did not stop")
			}
			if stolen.Holder == "" || stealErr != nil {
				t.Fatalf("the writer never reached %s (%v)", op, stealErr)
			}
			v := f.view()
			want := keysOfFiles(bad)
			if op == "clear-problems" {
				want = append(want, staleKey)
				slices.Sort(want)
			}
			if got := f.problemKeys(f.tbl.ID); v.version != version || !slices.Equal(got, want) {
				t.Fatalf("stale writer: version %d → %d, problems %v, want %v", version, v.version, got, want)
			}
			rows := make([]string, 0, len(v.dataRows))
			for k := range v.dataRows {
				rows = append(rows, k)
			}
			slices.Sort(rows)
			if !slices.Equal(rows, keysOfFiles(before.files[0])) || !slices.Equal(keysOfFiles(v.files[0]), keysOfFiles(before.files[0])) {
				t.Fatalf("stale writer changed the data files: rows %v, snapshot %v", rows, keysOfFiles(v.files[0]))
			}

			f.run(f.newWriter(), stolen)
			leasetest.Eventually(t, 20*time.Second, "the new holder repairs", func() bool {
				return len(f.problemKeys(f.tbl.ID)) == 0
			})
			v = f.view()
			f.checkExact(v)
			for _, fl := range v.files[0] {
				if slices.Contains(want, fl.key) || !f.readable(fl.key) {
					t.Fatalf("after the new holder's repair: file %s", fl.key)
				}
			}
		})
	}
}
