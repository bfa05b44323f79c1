package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

// Cuts are where files end in one partition: files [From, Ends[0]), [Ends[0], Ends[1]),
// ... The baselines cut their files exactly where Mink's index cut its ranges, so both
// build the same files from the same records.
type Cuts struct {
	Partition int32
	From      int64
	Ends      []int64
}

// End is the offset just past the last file.
func (c Cuts) End() int64 { return c.Ends[len(c.Ends)-1] }

// CutsOf returns the cuts of a partition's ranges.
func CutsOf(p int32, rs []ranges.Range) Cuts {
	c := Cuts{Partition: p, From: rs[0].Start}
	for _, r := range rs {
		c.Ends = append(c.Ends, r.End)
	}
	return c
}

// cutter builds one file per cut into io.Discard, fed record by record.
type cutter struct {
	mk    FileMaker
	cuts  Cuts
	i     int // file being built
	b     *parquetbuild.Builder
	files int64 // bytes of the files built
	// built are the files built, in order: their sizes and checksums tell whether two
	// loops built the same bytes.
	built []parquetbuild.FileStats
	// check, when set, runs before each record is added (the indexer's Check).
	check func(record.Record) error
}

// FileMaker starts one file's builder, writing to io.Discard: how a loop decodes and
// encodes its records.
type FileMaker func() (*parquetbuild.Builder, error)

// SpecFiles builds files of a JSON or raw table spec, decoded by pkg/rowcodec: item 1's
// encode.
func SpecFiles(spec tableschema.Spec) FileMaker {
	return func() (*parquetbuild.Builder, error) {
		return parquetbuild.NewBuilder(io.Discard, spec, parquetbuild.DefaultSettings())
	}
}

func newCutterFor(mk FileMaker, c Cuts) (*cutter, error) {
	ct := &cutter{mk: mk, cuts: c}
	return ct, ct.open()
}

func (c *cutter) open() (err error) {
	c.b, err = c.mk()
	return err
}

// add adds r and reports whether every file is done.
func (c *cutter) add(r record.Record) (bool, error) {
	if c.done() || r.Offset < c.cuts.From {
		return c.done(), nil
	}
	if c.check != nil {
		if err := c.check(r); err != nil {
			return false, err
		}
	}
	if err := c.b.Add(r); err != nil {
		return false, err
	}
	if r.Offset+1 < c.cuts.Ends[c.i] {
		return false, nil
	}
	fs, err := c.b.Close()
	if err != nil {
		return false, err
	}
	c.files += fs.Size
	c.built = append(c.built, fs)
	c.i++
	if c.done() {
		return true, nil
	}
	return false, c.open()
}

func (c *cutter) done() bool { return c.i >= len(c.cuts.Ends) }

func kgoRecord(r *kgo.Record) record.Record {
	var hs []record.Header
	for _, h := range r.Headers {
		hs = append(hs, record.Header{Key: h.Key, Value: h.Value})
	}
	return record.Record{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value, Headers: hs}
}

// consume reads [c.From, c.End()) of one partition with a plain franz-go consumer (the
// way any Kafka application reads), handing each record to fn until fn says done.
func (e *Env) consume(ctx context.Context, topic string, c Cuts, fn func(record.Record) (bool, error)) error {
	cl, err := e.KgoClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {c.Partition: kgo.NewOffset().At(c.From)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxPartitionBytes(4<<20), // kafkasrc's fetch size
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	end := c.End()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("bench: consume %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		var ferr error
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case done || ferr != nil:
			case r.Offset >= end:
				done = true
			default:
				done, ferr = fn(kgoRecord(r))
				done = done || r.Offset+1 >= end
			}
		})
		if ferr != nil || done {
			return ferr
		}
	}
}

// BareLoop is franz-go consume, rowcodec decode (Mink's own decoder) and the same Parquet
// encode (parquetbuild.Builder into io.Discard), no Postgres, no leases, files cut where
// c says: what the indexer process adds to its decoder and encoder. Item 1's baseline is
// BareLoopFor with JSONFiles, which decodes with encoding/json.
func (e *Env) BareLoop(ctx context.Context, topic string, spec tableschema.Spec, c Cuts) (time.Duration, error) {
	d, _, err := e.BareLoopFor(ctx, topic, SpecFiles(spec), c)
	return d, err
}

// BareLoopFor is the bare loop with the files made by mk; it also returns the files built.
func (e *Env) BareLoopFor(ctx context.Context, topic string, mk FileMaker, c Cuts) (time.Duration, []parquetbuild.FileStats, error) {
	start := time.Now()
	ct, err := newCutterFor(mk, c)
	if err != nil {
		return 0, nil, err
	}
	if err := e.consume(ctx, topic, c, ct.add); err != nil {
		return 0, nil, err
	}
	if !ct.done() {
		return 0, nil, fmt.Errorf("bench: bare loop ended after %d of %d files", ct.i, len(c.Ends))
	}
	return time.Since(start), ct.built, nil
}

// BareLoopParallel runs one bare loop per partition at once, each with its own files from
// mk: the machine's limit for indexing every partition.
func (e *Env) BareLoopParallel(ctx context.Context, topic string, mk func() (FileMaker, error), cs []Cuts) (time.Duration, error) {
	makers := make([]FileMaker, len(cs))
	for i := range cs {
		var err error
		if makers[i], err = mk(); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Go(func() { _, _, errs[i] = e.BareLoopFor(ctx, topic, makers[i], c) })
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// ConsumeOnly reads the records and drops them: the consume part of the bare loop.
func (e *Env) ConsumeOnly(ctx context.Context, topic string, c Cuts) (time.Duration, error) {
	start := time.Now()
	n := int64(0)
	err := e.consume(ctx, topic, c, func(r record.Record) (bool, error) { n++; return false, nil })
	return time.Since(start), err
}

// Fetch reads the records into memory, for EncodeOnly.
func (e *Env) Fetch(ctx context.Context, topic string, c Cuts) ([]record.Record, error) {
	var recs []record.Record
	err := e.consume(ctx, topic, c, func(r record.Record) (bool, error) { recs = append(recs, r); return false, nil })
	return recs, err
}

// EncodeOnly builds the files from records in memory: the decode and encode part of
// the bare loop.
func EncodeOnly(spec tableschema.Spec, c Cuts, recs []record.Record) (time.Duration, error) {
	return EncodeOnlyFor(SpecFiles(spec), nil, c, recs)
}

// EncodeOnlyFor is EncodeOnly with the files made by mk, and check (when set) run
// before each record is added.
func EncodeOnlyFor(mk FileMaker, check func(record.Record) error, c Cuts, recs []record.Record) (time.Duration, error) {
	start := time.Now()
	ct, err := newCutterFor(mk, c)
	if err != nil {
		return 0, err
	}
	ct.check = check
	for _, r := range recs {
		if done, err := ct.add(r); err != nil || done {
			return time.Since(start), err
		}
	}
	return 0, fmt.Errorf("bench: encode ended after %d of %d files", ct.i, len(c.Ends))
}

// TailerLoop is the indexer's own read path in this process: kafkasrc.Tailer polls into
// the same builder, without Postgres or leases. It tells apart the cost of how the
// indexer reads Kafka from the cost of running as a leased role process.
func TailerLoop(ctx context.Context, kc *kafkasrc.Client, topic string, spec tableschema.Spec, c Cuts) (time.Duration, error) {
	return TailerLoopFor(ctx, kc, topic, SpecFiles(spec), nil, c)
}

// TailerLoopFor is TailerLoop with the files made by mk, and check (when set) run
// before each record is added, as the indexer runs tablecodec's Check.
func TailerLoopFor(ctx context.Context, kc *kafkasrc.Client, topic string, mk FileMaker, check func(record.Record) error, c Cuts) (time.Duration, error) {
	start := time.Now()
	ct, err := newCutterFor(mk, c)
	if err != nil {
		return 0, err
	}
	ct.check = check
	t := kafkasrc.NewTailer(kc, topic, c.Partition, c.From)
	defer t.Close()
	for !ct.done() {
		recs, _, err := t.Poll(ctx)
		if err != nil {
			return 0, err
		}
		for _, r := range recs {
			if done, err := ct.add(r); err != nil {
				return 0, err
			} else if done {
				break
			}
		}
	}
	return time.Since(start), nil
}

// RangeBuilds rebuilds each range's file as an owner does for an uncached read:
// rangefile.Build (kafkasrc.ReadRange, the builder, and the size and checksum check
// against the index) into io.Discard, one range after another.
func RangeBuilds(ctx context.Context, kc *kafkasrc.Client, codecs *tablecodec.Codecs, t tables.Table, rs []ranges.Range) (time.Duration, error) {
	start := time.Now()
	for _, r := range rs {
		if _, err := rangefile.Build(ctx, kc, codecs, t, r, io.Discard); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}
