package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/registry"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// IndexRun is one run of real indexer processes over a topic, as Postgres recorded it.
type IndexRun struct {
	DB       *pgxpool.Pool
	URL      string // the database's URL, for more processes
	Table    tables.Table
	Procs    int
	Acquired map[int32]time.Time // when each partition lease was taken (database clock)
	Holder   map[int32]string
	Ranges   map[int32][]ranges.Range
	Perf     Profile // when IndexOptions.PerfDir is set
}

// Close closes the run's database pool.
func (r *IndexRun) Close() { r.DB.Close() }

// IndexOptions shape an indexing run.
type IndexOptions struct {
	Procs      int
	Topic      string
	Partitions int32
	TTL        time.Duration     // lease_ttl of the processes; rounds run every TTL/3
	Props      map[string]string // table properties (range size and age)
	Timeout    time.Duration
	PerfDir    string // when set, the processes are recorded with Linux perf while they index
	// Spec is the table's format; the zero Spec is EventSpec. A Schema Registry format
	// needs Registry, the registry's URL: the processes get it as --schema-registry-url,
	// and the table's first version is read from it as CreateTable reads it.
	Spec     tableschema.Spec
	Registry string
	Mode     tables.Mode // the table's mode; "" is append
}

// RunIndexers starts opts.Procs indexer processes on a fresh database, waits until all
// are members, creates a table over the topic (so every process takes its share in its
// next round), waits until every partition is indexed to its high watermark, and stops
// the processes.
func (e *Env) RunIndexers(ctx context.Context, opts IndexOptions) (*IndexRun, error) {
	db, url, err := e.NewDB(ctx)
	if err != nil {
		return nil, err
	}
	run := &IndexRun{DB: db, URL: url, Procs: opts.Procs, Acquired: map[int32]time.Time{}, Holder: map[int32]string{}, Ranges: map[int32][]ranges.Range{}}
	ok := false
	defer func() {
		if !ok {
			db.Close()
		}
	}()
	var procs []*Proc
	defer func() { StopAll(procs) }()
	spec := opts.Spec
	if spec.Format == "" {
		spec = EventSpec
	}
	var extra []string
	if opts.Registry != "" {
		extra = append(extra, "--schema-registry-url", opts.Registry)
	}
	for i := range opts.Procs {
		p, err := e.Start("indexer", "idx-"+strconv.Itoa(i+1), url, opts.TTL, extra...)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	if err := WaitMembers(ctx, db, 30*time.Second, procs...); err != nil {
		return nil, err
	}
	kc, err := e.Kafka()
	if err != nil {
		return nil, err
	}
	defer kc.Close()
	offs, err := kc.Offsets(ctx, opts.Topic)
	if err != nil {
		return nil, err
	}
	var perf *Perf
	if opts.PerfDir != "" {
		labels := map[int]string{}
		for _, p := range procs {
			labels[p.Pid()] = p.ID
		}
		if perf, err = StartPerf(opts.PerfDir, fmt.Sprintf("indexing-%d-procs", opts.Procs), labels); err != nil {
			return nil, err
		}
	}
	run.Table, err = createTable(ctx, db, tables.Table{Name: opts.Topic, Topic: opts.Topic, Spec: spec, Properties: opts.Props, Mode: opts.Mode}, opts.Partitions, opts.Registry)
	if err != nil {
		perf.Stop()
		return nil, err
	}
	err = waitFor(ctx, opts.Timeout, fmt.Sprintf("%d indexer(s) to index %s", opts.Procs, opts.Topic), func() (bool, error) {
		for _, p := range procs {
			if p.Exited() {
				return false, fmt.Errorf("%s exited: %s", p.ID, p.LogTail())
			}
		}
		ps, err := ranges.Partitions(ctx, db, run.Table.ID)
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			if !p.Indexed || p.IndexedEnd < offs[p.Partition].LastStable {
				return false, nil
			}
		}
		return true, nil
	})
	if opts.PerfDir != "" {
		run.Perf = perf.Stop()
	}
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT partition, acquired_at, holder FROM mink_leases WHERE kind = 'partition' AND table_id = $1`, run.Table.ID)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var p int32
		var at time.Time
		var holder string
		if err := rows.Scan(&p, &at, &holder); err != nil {
			rows.Close()
			return nil, err
		}
		run.Acquired[p], run.Holder[p] = at, holder
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for p := range opts.Partitions {
		if run.Ranges[p], err = ranges.List(ctx, db, run.Table.ID, p, -1); err != nil {
			return nil, err
		}
	}
	ok = true
	return run, nil
}

// createTable creates t as CreateTable does: a Schema Registry table's first version is
// its subject's latest schema, stored with it.
func createTable(ctx context.Context, db *pgxpool.Pool, t tables.Table, partitions int32, registryURL string) (tables.Table, error) {
	if !t.Spec.Format.Registry() {
		return tables.Create(ctx, db, t, partitions)
	}
	reg, err := registry.New(registry.Config{URL: registryURL})
	if err != nil {
		return tables.Table{}, err
	}
	defer reg.Close()
	spec, fields, schemas, err := tablecodec.New(db, reg).FirstVersion(ctx, t.Spec)
	if err != nil {
		return tables.Table{}, err
	}
	t.Spec = spec
	return tables.CreateVersioned(ctx, db, t, partitions, fields, schemas)
}

// Measured is what a run indexed in how long.
type Measured struct {
	Records, Bytes int64
	Took           time.Duration
	Cuts           []Cuts         // per partition, the ranges measured
	Ranges         []ranges.Range // the ranges measured, every partition
	Spread         map[string]int // partitions per holder
	Stagger        time.Duration  // last lease acquisition minus the first
}

// Measure is the run's throughput from the first lease acquisition to the store of the
// last range it counts. Every partition's last range is left out: it is cut by age
// (mink.range.max-age after its first record), and waiting out that age is not work.
func (r *IndexRun) Measure(sizes Sizes) (Measured, error) {
	m := Measured{Spread: map[string]int{}}
	var first, last, lastAcq time.Time
	for _, p := range slices.Sorted(maps.Keys(r.Ranges)) {
		rs := r.Ranges[p]
		if len(rs) < 2 {
			return m, fmt.Errorf("bench: partition %d of %s has %d range(s); need at least 2 (more records, or smaller ranges)", p, r.Table.Name, len(rs))
		}
		inc := rs[:len(rs)-1]
		m.Cuts = append(m.Cuts, CutsOf(p, inc))
		m.Ranges = append(m.Ranges, inc...)
		m.Bytes += sizes.Bytes(p, inc[0].Start, inc[len(inc)-1].End)
		m.Records += inc[len(inc)-1].End - inc[0].Start
		if at := inc[len(inc)-1].CreatedAt; at.After(last) {
			last = at
		}
		acq := r.Acquired[p]
		if first.IsZero() || acq.Before(first) {
			first = acq
		}
		if acq.After(lastAcq) {
			lastAcq = acq
		}
		m.Spread[r.Holder[p]]++
	}
	m.Took = last.Sub(first)
	m.Stagger = lastAcq.Sub(first)
	if m.Took <= 0 {
		return m, fmt.Errorf("bench: %s: last range stored %v after the first lease was taken", r.Table.Name, m.Took)
	}
	return m, nil
}

// MBps is megabytes (10^6) of record keys and values per second.
func MBps(bytes int64, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }

// PerSec is a count per second.
func PerSec(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() }
