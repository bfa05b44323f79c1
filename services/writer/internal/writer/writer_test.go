package writer

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/minkhq/mink/pkg/assembly"
	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/lease"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/tables"
)

// Produce, index, commit: the committed snapshot, read back with iceberg-go from the
// stored files, holds every Kafka record of the covered offsets exactly once, with
// statistics; offsets without rows (an aborted transaction) are covered without a file.
func TestCommitsTileKafka(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3, nil)
	w := f.newWriter()
	f.run(w, f.take("writer", -1, "w1"))

	// Before any range, the writer makes metadata without a snapshot: the table loads.
	leasetest.Eventually(t, 10*time.Second, "first metadata", func() bool {
		return f.count(`SELECT count(*) FROM mink_table_meta WHERE table_id = $1`) == 1
	})
	v := f.view()
	if v.md.CurrentSnapshot() != nil || v.md.Location() != "s3://mink/default/events" || v.md.Version() != 2 {
		t.Fatalf("first metadata: snapshot %v, location %s, format %d", v.md.CurrentSnapshot(), v.md.Location(), v.md.Version())
	}
	uuid := v.md.TableUUID()

	f.produce(0, 50)
	f.produce(1, 7)
	f.abortedTxn(1, 9) // offsets 7..15, its marker at 16: [10, 15) holds no row
	f.produce(1, 13)
	// partition 2 stays empty: nothing indexed, nothing covered.
	f.index(0, 10)
	f.index(1, 5)
	v = f.waitCovered()
	f.checkExact(v)
	if _, ok := v.cover[2]; ok {
		t.Fatalf("empty partition covered: %v", v.cover)
	}
	// The aborted transaction's offsets and its marker are covered, and the range of only
	// those offsets has no file.
	if c := v.cover[1]; c.Start != 0 || c.End != 30 {
		t.Fatalf("partition 1 covers %v, want [0, 30)", c)
	}
	empty := 0
	for _, r := range v.ranges[1] {
		if r.Records == 0 {
			empty++
		}
	}
	if empty == 0 || v.nfiles() != 5+len(v.ranges[1])-empty {
		t.Fatalf("%d files, %d empty ranges of partition 1", v.nfiles(), empty)
	}
	ks, ke := icebergmeta.CoverageKeys(0)
	if v.summary(ks) != "0" || v.summary(ke) != "50" {
		t.Fatalf("summary of partition 0: %s..%s", v.summary(ks), v.summary(ke))
	}

	// More records, more commits: the same table, a longer history.
	f.produce(0, 30)
	f.produce(2, 9)
	f.index(0, 10)
	f.index(2, 4)
	v = f.waitCovered()
	f.checkExact(v)
	md := v.md
	if md.TableUUID() != uuid {
		t.Fatal("table uuid changed between commits")
	}
	if n := len(md.Snapshots()); n < 2 {
		t.Fatalf("%d snapshots after two rounds", n)
	}
	logs := slices.Collect(md.SnapshotLogs())
	if logs[len(logs)-1].SnapshotID != md.CurrentSnapshot().SnapshotID {
		t.Fatal("snapshot log does not end at the current snapshot")
	}
	main := md.Ref()
	if main.SnapshotID != md.CurrentSnapshot().SnapshotID {
		t.Fatalf("refs.main is %d, current %d", main.SnapshotID, md.CurrentSnapshot().SnapshotID)
	}
	// The log keeps write.metadata.previous-versions-max (10) entries: a slow run commits
	// more versions than that.
	if n := len(slices.Collect(md.PreviousFiles())); int64(n) != min(v.version-1, 10) {
		t.Fatalf("metadata log has %d entries at version %d, want min(version-1, 10)", n, v.version)
	}
	if md.CurrentSnapshot().Summary.Operation != table.OpAppend {
		t.Fatalf("operation %s", md.CurrentSnapshot().Summary.Operation)
	}
	if err := checkCollected(v, false); err != nil {
		t.Fatal(err)
	}
}

// Assembly merges k adjacent files of one size tier (k = 4, the default; ranges of 10
// rows, far below the target) in a replace snapshot holding the same rows over the same
// offsets: 20 ranges make one file of 16 and one of 4, as a number in base 4 (one build
// each, however many carries); 6 make one of 4 and leave 2.
func TestAssembly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2, map[string]string{PropAssemblyTierFiles: "4"})
	f.produce(0, 200)
	f.produce(1, 60)
	f.index(0, 10) // 20 small files
	f.index(1, 10) // 6
	w := f.newWriter()
	f.run(w, f.take("writer", -1, "w1"))
	v := f.waitCovered()
	before := v.cover
	ends := func(fs []file) []int64 {
		var out []int64
		for _, fl := range fs {
			out = append(out, fl.end)
		}
		return out
	}
	leasetest.Eventually(t, 20*time.Second, "assembly merges four ranges of a tier at a time", func() bool {
		v = f.view()
		return slices.Equal(ends(v.files[0]), []int64{160, 200}) && slices.Equal(ends(v.files[1]), []int64{40, 50, 60})
	})
	f.checkExact(v)
	if !maps.Equal(v.cover, before) {
		t.Fatalf("coverage moved from %v to %v", before, v.cover)
	}
	replaces := 0
	for _, s := range v.md.Snapshots() {
		if s.Summary.Operation == table.OpReplace {
			replaces++
			if s.Summary.Properties["added-records"] != s.Summary.Properties["deleted-records"] {
				t.Fatalf("replace snapshot changes rows: %v", s.Summary.Properties)
			}
		}
	}
	if replaces != 1 {
		t.Fatalf("%d replace snapshots; one round merges it all", replaces)
	}
}

// A quiet partition (a few records at a time, one small range per commit, far below the
// target): after each commit and the assembly it starts, the partition holds at most
// 1 + (k-1) files per size tier, and the table holds every record produced exactly once.
func TestAssemblyQuietPartition(t *testing.T) {
	t.Parallel()
	const k = 4
	f := newFixture(t, 1, map[string]string{PropAssemblyTierFiles: strconv.Itoa(k)})
	w := f.newWriter()
	f.run(w, f.take("writer", -1, "w1"))
	policy := assembly.Policy{Target: tables.DefaultProps.AssemblyTargetBytes, Tier: k}
	rng := rand.New(rand.NewPCG(17, 1))
	var produced int64
	most := 0
	for range 60 {
		n := 1 + rng.IntN(5)
		f.produce(0, n)
		produced += int64(n)
		f.index(0, 5)
		var v view
		leasetest.Eventually(t, 20*time.Second, "the commit and its assembly", func() bool {
			v = f.view()
			return v.md != nil && v.md.CurrentSnapshot() != nil && f.covers(v) && len(assembly.Plan(liveOf(v), nil, policy)) == 0
		})
		fs := v.files[0]
		lo, hi := assembly.Tier(fs[len(fs)-1].records, k), 0
		for _, fl := range fs {
			lo, hi = min(lo, assembly.Tier(fl.records, k)), max(hi, assembly.Tier(fl.records, k))
		}
		if bound := 1 + (k-1)*(hi-lo+1); len(fs) > bound {
			t.Fatalf("%d files over tiers %d..%d, bound %d", len(fs), lo, hi, bound)
		}
		most = max(most, len(fs))
	}
	v := f.view()
	f.checkExact(v)
	if got := v.summary("total-records"); got != strconv.FormatInt(produced, 10) {
		t.Fatalf("the table holds %s rows, %d were produced", got, produced)
	}
	ranges := len(v.ranges[0])
	t.Logf("%d records in %d ranges: %d files at the end, %d at most", produced, ranges, len(v.files[0]), most)
	if len(v.files[0]) >= ranges/4 {
		t.Fatalf("%d files of %d ranges", len(v.files[0]), ranges)
	}
}

// liveOf is the current snapshot's files as the writer holds them.
func liveOf(v view) map[int32][]icebergmeta.DataFile {
	m := map[int32][]icebergmeta.DataFile{}
	for p, fs := range v.files {
		for _, fl := range fs {
			m[p] = append(m[p], icebergmeta.DataFile{Key: fl.key, Partition: p, Start: fl.start, End: fl.end, Records: fl.records, Size: fl.size})
		}
	}
	return m
}

// Kafka's log start moves (DeleteRecords): the next snapshot drops exactly the files
// below it, and the file straddling it is replaced by its retained part.
func TestRetentionDropsFilesBelowLogStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2, nil)
	f.produce(0, 100)
	f.produce(1, 100)
	f.index(0, 10)
	f.index(1, 10)
	w := f.newWriter()
	f.run(w, f.take("writer", -1, "w1"))
	before := f.waitCovered()
	f.checkExact(before)

	// One request, so one maintenance sees both: partition 0 on a file boundary,
	// partition 1 inside [40, 50).
	f.deleteRecords(map[int32]int64{0: 30, 1: 45})
	var v view
	leasetest.Eventually(t, 20*time.Second, "files below the log start dropped", func() bool {
		v = f.view()
		return v.cover[0].Start == 30 && v.cover[1].Start == 45
	})
	f.checkExact(v)
	s := v.md.CurrentSnapshot().Summary
	if s.Operation != table.OpOverwrite || s.Properties[SummaryDroppedFiles] != "8" || s.Properties[SummaryTailFiles] != "1" ||
		s.Properties[SummaryTailRecords] != "5" || s.Properties[SummaryDroppedRecords] != "80" {
		t.Fatalf("expiry snapshot: %v", s)
	}
	// Exactly the files below: partition 0 keeps its files from 30 on, byte for byte the
	// same; partition 1 keeps those from 50 on, plus [45, 50).
	for p, from := range map[int32]int64{0: 30, 1: 50} {
		var want, got []string
		for _, fl := range before.files[p] {
			if fl.start >= from {
				want = append(want, fl.key)
			}
		}
		for _, fl := range v.files[p] {
			if fl.start >= from {
				got = append(got, fl.key)
			}
		}
		if !slices.Equal(want, got) {
			t.Fatalf("partition %d kept %v, want %v", p, got, want)
		}
	}
	if fl := v.files[1][0]; fl.start != 45 || fl.end != 50 || fl.records != 5 {
		t.Fatalf("retained part of partition 1: [%d, %d) %d rows", fl.start, fl.end, fl.records)
	}
	if v.cover[0].End != 100 || v.cover[1].End != 100 {
		t.Fatalf("coverage ends moved: %v", v.cover)
	}
}

// A writer whose lease is taken between building a commit and storing it cannot make
// its snapshot current: the commit pointer, the data files and the metadata files stay
// as they were. The new holder then commits normally.
func TestStaleWriterCannotCommit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, nil)
	f.produce(0, 40)
	f.index(0, 10)

	var stolen lease.Lease
	w := f.newWriter()
	w.beforeStore = func(ctx context.Context, op string) {
		if op == string(table.OpAppend) && stolen.Holder == "" {
			stolen = f.take("writer", -1, "thief")
		}
	}
	_, done := f.run(w, f.take("writer", -1, "w1"))
	select {
	case <-done: // Work returns once the lease is lost
	case <-time.After(20 * time.Second):
		t.Fatal("the stale writer did not stop")
	}
	if stolen.Holder == "" {
		t.Fatal("the writer never reached a commit")
	}
	version, _ := f.version()
	v := f.view()
	if version != 1 || v.md.CurrentSnapshot() != nil {
		t.Fatalf("stale writer moved the table to version %d (snapshot %v)", version, v.md.CurrentSnapshot())
	}
	if n := f.count(`SELECT count(*) FROM mink_data_files WHERE table_id = $1`); n != 0 {
		t.Fatalf("stale writer stored %d data files", n)
	}
	if n := f.count(`SELECT count(*) FROM mink_meta_files WHERE table_id = $1`); n != 1 {
		t.Fatalf("stale writer stored metadata files: %d rows", n)
	}

	w2 := f.newWriter()
	f.run(w2, stolen)
	f.checkExact(f.waitCovered())
}

// Expiry and collection: with short retention, many commits, assembly and a moving
// log start, what live snapshots name is never removed (checked in consistent reads
// while the writer works), and once the table is quiet nothing else is left: no
// orphan data file rows, metadata files or ranges below the log start.
func TestExpiryAndCollection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2, map[string]string{
		table.MaxSnapshotAgeMsKey:            "1",
		table.MinSnapshotsToKeepKey:          "3",
		table.ManifestMinMergeCountKey:       "3",
		PropAssemblyTargetBytes:              "12000",
		PropAssemblyTierFiles:                "4",
		table.MetadataPreviousVersionsMaxKey: "4",
	})
	w := f.newWriter()
	f.run(w, f.take("writer", -1, "w1"))

	stop := make(chan struct{})
	checked := make(chan int)
	go func() {
		// Watch, in consistent reads, while the writer commits, expires and collects.
		n := 0
		defer func() { checked <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			v, err := f.viewE()
			if err == nil {
				err = checkCollected(v, false)
			}
			if err != nil {
				t.Errorf("while the writer works: %v", err)
				return
			}
			n++
		}
	}()
	for round := range 8 {
		f.produce(0, 20)
		f.produce(1, 10)
		f.index(0, 4)
		f.index(1, 5)
		if round == 4 {
			f.deleteRecords(map[int32]int64{0: 60, 1: 22})
		}
		f.waitCovered()
	}
	close(stop)
	if n := <-checked; n == 0 {
		t.Fatal("no consistent read was checked")
	}

	var v view
	leasetest.Eventually(t, 20*time.Second, "expiry and collection settle", func() bool {
		v = f.view()
		err := checkCollected(v, true)
		if err != nil && !errors.Is(err, errOrphans) {
			t.Fatal(err)
		}
		return len(v.md.Snapshots()) == 3 && err == nil
	})
	f.checkExact(v)
	if n := len(slices.Collect(v.md.PreviousFiles())); n > 4 {
		t.Fatalf("metadata log of %d entries, max 4", n)
	}
	if v.cover[0].Start != 60 || v.cover[1].Start != 22 {
		t.Fatalf("coverage %v", v.cover)
	}
	// Ranges: only those at or above the log start, or still named, are left, and they
	// still tile [first offset, indexed end).
	for p, ls := range map[int32]int64{0: 60, 1: 22} {
		rs := v.ranges[p]
		if len(rs) == 0 || rs[0].Start > ls || rs[0].End <= ls {
			t.Fatalf("partition %d: the first range left is %+v, want the one holding the log start %d", p, rs[0], ls)
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].Start != rs[i-1].End {
				t.Fatalf("partition %d: index gap at %d", p, rs[i-1].End)
			}
		}
		var first int64
		if err := f.db.QueryRow(f.ctx, `SELECT first_offset FROM mink_partitions WHERE table_id = $1 AND partition = $2`, f.tbl.ID, p).Scan(&first); err != nil {
			t.Fatal(err)
		}
		if first != rs[0].Start {
			t.Fatalf("partition %d: first_offset %d, first range at %d", p, first, rs[0].Start)
		}
	}
	// Manifests were merged rather than one kept per commit.
	if ms, err := v.manifests(v.md.CurrentSnapshot()); err != nil || len(ms) > 6 {
		t.Fatalf("%d manifests in the current snapshot (%v)", len(ms), err)
	}
}

// Two writers committing at once: per version at most one wins. Under one epoch the
// version compare-and-set decides; across epochs the lease does.
func TestConcurrentCommits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, nil)
	log := slog.New(slog.NewTextHandler(testLog{t}, nil))
	open := func(w *Writer, l lease.Lease) *tableWriter {
		t.Helper()
		tw, err := w.open(f.ctx, l, log, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tw
	}
	// race runs commitNew on both at once, both past building before either stores.
	race := func(a, b *tableWriter) (errA, errB error) {
		var ready sync.WaitGroup
		ready.Add(2)
		gate := make(chan struct{})
		hook := func(context.Context, string) { ready.Done(); <-gate }
		a.w.beforeStore, b.w.beforeStore = hook, hook
		defer func() { a.w.beforeStore, b.w.beforeStore = nil, nil }()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); errA = a.commitNew(f.ctx) }()
		go func() { defer wg.Done(); errB = b.commitNew(f.ctx) }()
		ready.Wait()
		close(gate)
		wg.Wait()
		return errA, errB
	}

	la := f.take("writer", -1, "a")
	wa, wb := f.newWriter(), f.newWriter()
	open(wa, la) // creates version 1

	// Same lease, same base version: the compare-and-set lets one through.
	f.produce(0, 10)
	f.index(0, 10)
	errA, errB := race(open(wa, la), open(wb, la))
	if (errA == nil) == (errB == nil) || !errors.Is(errors.Join(errA, errB), ErrConflict) {
		t.Fatalf("same epoch: %v / %v", errA, errB)
	}
	if v, _ := f.version(); v != 2 {
		t.Fatalf("version %d after one winner", v)
	}

	// Across epochs: b takes the lease; a, holding the older epoch, cannot commit.
	f.produce(0, 10)
	f.index(0, 10)
	ta := open(wa, la)
	lb := f.take("writer", -1, "b")
	errA, errB = race(ta, open(wb, lb))
	if !errors.Is(errA, lease.ErrLeaseLost) || errB != nil {
		t.Fatalf("older epoch: %v, newer epoch: %v", errA, errB)
	}
	if v, _ := f.version(); v != 3 {
		t.Fatalf("version %d", v)
	}

	// Many rounds, the lease moving at random: versions advance by one per success.
	leases := map[string]lease.Lease{"a": la, "b": lb}
	writers := map[string]*Writer{"a": wa, "b": wb}
	wins := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for range 12 {
		f.produce(0, 3)
		f.index(0, 3)
		if rng.IntN(2) == 0 {
			h := []string{"a", "b"}[rng.IntN(2)]
			leases[h] = f.take("writer", -1, h)
		}
		errA, errB := race(open(writers["a"], leases["a"]), open(writers["b"], leases["b"]))
		for _, err := range []error{errA, errB} {
			if err == nil {
				wins++
			} else if !errors.Is(err, lease.ErrLeaseLost) && !errors.Is(err, ErrConflict) {
				t.Fatal(err)
			}
		}
	}
	v := f.view()
	if v.version != int64(3+wins) {
		t.Fatalf("version %d after %d more wins from version 3", v.version, wins)
	}
	if wins != 12 {
		t.Fatalf("%d of 12 rounds committed; each round one writer holds the lease", wins)
	}
	f.checkExact(v)
	if !f.covers(v) {
		t.Fatal("not everything committed")
	}
}

// Commits need only Postgres: with Kafka down the writer still commits what is indexed
// (expiry and assembly wait for Kafka).
func TestCommitsWithoutKafka(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2, nil)
	f.produce(0, 30)
	f.produce(1, 20)
	f.index(0, 10)
	f.index(1, 10)
	f.kafka.Stop()
	f.run(f.newWriter(), f.take("writer", -1, "w1"))
	v := f.waitCovered()
	if v.nfiles() != 5 || v.summary("total-records") != "50" {
		t.Fatalf("%d files, %s records", v.nfiles(), v.summary("total-records"))
	}
}

// Postgres unreachable: the writer stops committing; once Postgres answers it goes on
// by itself, in the same Work call, without a restart.
func TestPostgresOutage(t *testing.T) {
	c, db := privateDB(t)
	f := newFixtureDB(t, db, 1, nil)
	f.produce(0, 30)
	f.index(0, 10)
	_, done := f.run(f.newWriter(), f.take("writer", -1, "w1"))
	f.checkExact(f.waitCovered())

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	f.produce(0, 20) // Kafka goes on; the index cannot
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	db.Reset() // the test's own statements should not meet connections the restart cut
	f.index(0, 10)
	f.checkExact(f.waitCovered())
	select {
	case <-done:
		t.Fatal("the writer stopped")
	default:
	}
}
