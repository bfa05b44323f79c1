package files

// Tail files of live table loads. A load names, per partition, offsets beyond the
// committed snapshot that no file yet holds; the file of such a span is measured (built
// once, from Kafka, with parquetbuild.DefaultSettings and the schema point in force at
// its start, like an indexed range, and ending at the next point) by its owner, which
// keeps it in its cache and records it in mink_data_files with an expiry, so that any
// node can serve (or rebuild) it. Its key is layout.DataKey, so a later commit of the
// identical range names the same file.
//
// A data file's owner is a function of its table, partition and offsets, not of its
// checksum (OwnerKey): so the owner of a span is known before its bytes are, and the
// node that measures a tail file is the node that serves it.
//
// A measure travels like a forwarded read: ReadFile of the span's identity key
// (TailIdentity) with its budget and TTL in the request's `measure` (peers only: the
// node's gRPC door lets no client call the file service); the owner bounds both by the
// table's properties, answers with the file's info and names the file and where it ends
// in the trailer. Whatever a caller asks, a measured file's row expires no later than
// the table's mink.live.ttl after it was last recorded.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	filev1 "github.com/minkhq/mink/gen/mink/file/v1"
	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/filecache"
	"github.com/minkhq/mink/pkg/flight"
	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/objects"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/rangefile"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/schemapoints"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/upsert"
)

const (
	// Trailer of a measure's answer.
	mdMeasuredKey  = "mink-measured-key"
	mdMeasuredEnd  = "mink-measured-end"
	mdMeasuredRead = "mink-measured-read"
	mdMeasuredCut  = "mink-measured-cut"
	// recallFor is how long an owner remembers a span it measured: a load on another
	// node that looked for tail files just before this one was recorded asks again.
	recallFor = time.Minute
)

var (
	identityRE = regexp.MustCompile(`^([^/]+)/([^/]+)/data/_kafka_partition=(\d+)/(\d{20})-(\d{20})$`)
	// errCut ends a tail build at its byte budget.
	errCut = errors.New("tail cut at its byte budget")
)

// OwnerKey is what decides a key's owner: a data file's key without its checksum (its
// table, partition and offsets), any other key as it is. A data file's key is
// "<prefix>/data/_kafka_partition=<digits>/<20 digits>-<20 digits>-<hex>.parquet". It is
// parsed by hand: it runs on every S3 GET, and a regexp with a capture group there
// (backtracking over the whole key) was a visible share of a cached read's CPU.
func OwnerKey(key string) string {
	rest, ok := strings.CutSuffix(key, ".parquet")
	if !ok {
		return key
	}
	dash := strings.LastIndexByte(rest, '-')
	if dash < 0 || !allOf(rest[dash+1:], isLowerHex) {
		return key
	}
	span := rest[:dash]
	slash := strings.LastIndexByte(span, '/')
	if slash < 0 {
		return key
	}
	offsets := span[slash+1:] // <20 digits>-<20 digits>
	if len(offsets) != 41 || offsets[20] != '-' || !allOf(offsets[:20], isDigit) || !allOf(offsets[21:], isDigit) {
		return key
	}
	dir := span[:slash]
	slash = strings.LastIndexByte(dir, '/')
	if slash < 0 {
		return key
	}
	part, ok := strings.CutPrefix(dir[slash+1:], "_kafka_partition=")
	if !ok || !allOf(part, isDigit) {
		return key
	}
	// What is left must be "<prefix>/data" with a prefix of at least one byte and no
	// newline (the regexp's ".+", kept exact).
	prefix, ok := strings.CutSuffix(dir[:slash], "/data")
	if !ok || prefix == "" || strings.IndexByte(prefix, '\n') >= 0 {
		return key
	}
	return span
}

// allOf reports whether s is not empty and every byte of it is one of is.
func allOf(s string, is func(byte) bool) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if !is(s[i]) {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool    { return '0' <= c && c <= '9' }
func isLowerHex(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' }

// TailIdentity names the span [start, end) of a partition before its file exists: the
// OwnerKey of the data file of that span.
func TailIdentity(ns, name string, partition int32, start, end int64) string {
	return strings.TrimSuffix(layout.DataKey(ns, name, partition, start, end, ""), "-.parquet")
}

// MeasureRequest asks for the tail file of offsets [Start, End) of a partition.
type MeasureRequest struct {
	Table      tables.Table
	Partition  int32
	Start, End int64
	// MaxBytes bounds the record bytes (keys, values, header keys and values) the build
	// reads: it stops before the record that would pass it (never before the first).
	// More than the table's mink.live.max-bytes reads that much.
	MaxBytes int64
	// TTL is how long the file's row stays at least (expires_at = now() + TTL). More
	// than the table's mink.live.ttl is mink.live.ttl.
	TTL time.Duration
}

// bounded is req with its budget and TTL bounded by its table's properties: what any
// caller, local or a peer, gets at most.
func (req MeasureRequest) bounded() MeasureRequest {
	props := req.Table.Props()
	req.MaxBytes = min(req.MaxBytes, props.LiveMaxBytes)
	req.TTL = min(req.TTL, props.LiveTTL)
	return req
}

// measureBudget reads a peer's MeasureSpec: its budget and TTL, each positive and bounded
// by the table's properties. The TTL is compared in milliseconds before it becomes a
// Duration, so no value a peer sends can overflow into an expiry in the past or the far
// future.
func measureBudget(spec *filev1.MeasureSpec, props tables.Props) (maxBytes int64, ttl time.Duration, err error) {
	if spec.GetMaxBytes() <= 0 {
		return 0, 0, apierr.Invalid("measure.max_bytes", "must be positive (got %d)", spec.GetMaxBytes())
	}
	if spec.GetTtlMs() <= 0 {
		return 0, 0, apierr.Invalid("measure.ttl_ms", "must be positive (got %d)", spec.GetTtlMs())
	}
	maxBytes = min(spec.GetMaxBytes(), props.LiveMaxBytes)
	ttl = props.LiveTTL
	if ms := spec.GetTtlMs(); ms < props.LiveTTL.Milliseconds() {
		ttl = time.Duration(ms) * time.Millisecond
	}
	return maxBytes, ttl, nil
}

// Measured is a measured tail file: its key (recorded in mink_data_files), its end
// (before the requested one when the build was cut), why it was cut, and the record
// bytes its build read. A tail cut at its very first record has no file: Key is empty
// and End is the span's start.
type Measured struct {
	Key  string
	End  int64
	Read int64
	Cut  string // "" (not cut), CutBytes or CutSchema
}

// Why a tail build ended before the end it was asked for.
const (
	// CutBytes: the byte budget.
	CutBytes = "max-bytes"
	// CutSchema: a record whose registry schema the table has not stored yet, or that
	// needs a newer schema version: indexing learns it, a later load goes further.
	CutSchema = "schema"
	// CutPoint: a schema change takes effect at End (a schema point): the rest of the
	// span is another file, decoded as the change says.
	CutPoint = "point"
)

// Measure returns the tail file of req's span, measured by its owner (this node or the
// one TailIdentity hashes to, like a forwarded read) once: concurrent measures of one
// span share a build, and a span measured in the last minute whose file is still cached
// is not built again.
func (s *Store) Measure(ctx context.Context, req MeasureRequest) (Measured, error) {
	if req.End <= req.Start || req.MaxBytes <= 0 || req.TTL <= 0 {
		return Measured{}, apierr.New(apierr.Internal, "bad tail span [%d, %d) (max %d bytes, ttl %v)", req.Start, req.End, req.MaxBytes, req.TTL)
	}
	req = req.bounded()
	id := TailIdentity(req.Table.Namespace, req.Table.Name, req.Partition, req.Start, req.End)
	node, addr := s.members.ownerOf(id)
	if node == s.o.NodeID || addr == "" {
		return s.measureLocal(ctx, req)
	}
	m, err := s.forwardMeasure(ctx, node, addr, id, req)
	var un *unreachedError
	if errors.As(err, &un) && ctx.Err() == nil {
		if s.logOnce("unreachable "+node, 10*time.Second) {
			s.log.WarnContext(ctx, "owner unreachable; measuring its tail files here (logged once per 10s per owner)",
				"span", id, "owner", node, "addr", addr, "error", un.err)
		}
		s.met.forwarded(ctx, "fallback")
		return s.measureLocal(ctx, req)
	}
	return m, err
}

func (s *Store) forwardMeasure(ctx context.Context, node, addr, id string, req MeasureRequest) (Measured, error) {
	conn, err := s.peers.Conn(addr)
	if err != nil {
		return Measured{}, &unreachedError{node, addr, err}
	}
	sctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, mdForwardedBy, s.o.NodeID))
	defer cancel()
	stream, err := filev1.NewFileServiceClient(conn).ReadFile(sctx, &filev1.ReadFileRequest{Key: id, InfoOnly: true,
		Measure: &filev1.MeasureSpec{MaxBytes: req.MaxBytes, TtlMs: max(1, req.TTL.Milliseconds())}})
	if err != nil {
		s.met.forwarded(ctx, "error")
		return Measured{}, &unreachedError{node, addr, err}
	}
	var answered bool
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
		answered = true
	}
	tr := stream.Trailer()
	if !errors.Is(err, io.EOF) {
		if len(tr.Get(mdServedBy)) == 0 && ctx.Err() == nil {
			s.met.forwarded(ctx, "error")
			return Measured{}, &unreachedError{node, addr, err}
		}
		s.met.forwarded(ctx, "ok") // the owner answered; its answer is an error
		return Measured{}, err
	}
	s.met.forwarded(ctx, "ok")
	keys, ends, reads := tr.Get(mdMeasuredKey), tr.Get(mdMeasuredEnd), tr.Get(mdMeasuredRead)
	var end, read int64
	var err1, err2 error
	if len(ends) == 1 && len(reads) == 1 {
		end, err1 = strconv.ParseInt(ends[0], 10, 64)
		read, err2 = strconv.ParseInt(reads[0], 10, 64)
	}
	if !answered || len(keys) != 1 || len(ends) != 1 || len(reads) != 1 || err1 != nil || err2 != nil {
		return Measured{}, apierr.New(apierr.Internal, "owner %s answered the measure of %s without naming the file", node, id)
	}
	m := Measured{Key: keys[0], End: end, Read: read}
	if c := tr.Get(mdMeasuredCut); len(c) == 1 {
		m.Cut = c[0]
	}
	return m, nil
}

// serveMeasure answers a measure forwarded by another node: the span is measured here,
// whatever this node thinks its owner is (as ReadFile does).
func (s *Store) serveMeasure(req *filev1.ReadFileRequest, stream grpc.ServerStreamingServer[filev1.ReadFileResponse]) error {
	ctx := stream.Context()
	var m Measured
	err := ValidKey(req.GetKey())
	if err == nil && req.GetRange() != nil {
		err = apierr.Invalid("range", "a measure reads no range")
	}
	if err == nil {
		m, err = s.measureKey(ctx, req.GetKey(), req.GetMeasure())
	}
	var obj *Object
	if err == nil && m.Key == "" {
		obj = &Object{} // cut at its first record: no file, only the trailer says so
	} else if err == nil {
		if f, ok := s.o.Cache.Get(m.Key); ok {
			obj, err = s.fromFile(f, nil, true, false)
		} else { // evicted since: served as any file is
			obj, err = s.openLocal(ctx, m.Key, nil, true)
		}
	}
	if !errors.Is(err, errStopping) {
		tr := metadata.Pairs(mdServedBy, s.o.NodeID)
		if err == nil {
			tr.Append(mdMeasuredKey, m.Key)
			tr.Append(mdMeasuredEnd, strconv.FormatInt(m.End, 10))
			tr.Append(mdMeasuredRead, strconv.FormatInt(m.Read, 10))
			if m.Cut != "" {
				tr.Append(mdMeasuredCut, m.Cut)
			}
		}
		stream.SetTrailer(tr)
	}
	if err != nil {
		return apierr.GRPC(err)
	}
	defer obj.Close()
	return stream.Send(&filev1.ReadFileResponse{Part: &filev1.ReadFileResponse_Info{Info: &filev1.FileInfo{
		Size: obj.Size, Etag: obj.ETag, LastModified: timestamppb.New(obj.LastModified),
		Offset: obj.Offset, Length: obj.Length, ServedBy: obj.ServedBy, CacheHit: obj.CacheHit,
	}}})
}

// measureKey measures the span an identity key names, within the budget and TTL spec
// asks for as the table bounds them.
func (s *Store) measureKey(ctx context.Context, id string, spec *filev1.MeasureSpec) (Measured, error) {
	p := identityRE.FindStringSubmatch(id)
	if p == nil {
		return Measured{}, apierr.Invalid("key", "%q names no tail span", id)
	}
	part, err1 := strconv.ParseInt(p[3], 10, 32)
	start, err2 := strconv.ParseInt(p[4], 10, 64)
	end, err3 := strconv.ParseInt(p[5], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || end <= start {
		return Measured{}, apierr.Invalid("key", "%q names no tail span", id)
	}
	lctx, cancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	t, err := tables.Get(lctx, s.o.DB, p[1], p[2])
	cancel()
	if err != nil {
		if apierr.Classify(err) == apierr.NotFound {
			return Measured{}, err
		}
		return Measured{}, apierr.Postgres(err, "look up the table of %s", id)
	}
	// A peer cannot make this node build more than the table allows, nor keep what it
	// builds longer.
	props := t.Props()
	if end-start > props.LiveMaxRecords {
		return Measured{}, apierr.Invalid("key", "span %s is longer than the table's %s (%d)", id, tables.PropLiveMaxRecords, props.LiveMaxRecords)
	}
	maxBytes, ttl, err := measureBudget(spec, props)
	if err != nil {
		return Measured{}, err
	}
	return s.measureLocal(ctx, MeasureRequest{Table: t, Partition: int32(part), Start: start, End: end,
		MaxBytes: maxBytes, TTL: ttl})
}

// recalled is a span measured in the last minute.
type recalled struct {
	m   Measured
	row tailRow
	at  time.Time
}

// tailRow is a measured tail file's mink_data_files row.
type tailRow struct {
	table           int64
	key             string
	partition       int32
	start, end      int64
	records, size   int64
	sha256          string
	settings, stats []byte
	keys            []byte // an upsert table's (upsert.Keys.Encode)
}

// measureLocal measures req's span here, sharing a build under way, or recalling one
// made in the last minute whose file is still cached.
func (s *Store) measureLocal(ctx context.Context, req MeasureRequest) (Measured, error) {
	id := TailIdentity(req.Table.Namespace, req.Table.Name, req.Partition, req.Start, req.End) + "|" + strconv.FormatInt(req.MaxBytes, 10)
	if m, ok, err := s.recall(ctx, id, req); ok {
		return m, err
	}
	m, _, err := s.measures.Do(ctx, id, func(b *flight.Build) (Measured, error) {
		// A build that ended since this caller looked is recalled, not made again.
		if m, ok, err := s.recall(b.Context(), id, req); ok {
			return m, err
		}
		m, row, err := s.measure(req, b)
		if err == nil {
			s.mu.Lock()
			for k, r := range s.measured {
				if time.Since(r.at) >= recallFor {
					delete(s.measured, k)
				}
			}
			s.measured[id] = recalled{m: m, row: row, at: time.Now()}
			s.mu.Unlock()
		}
		return m, err
	})
	return m, s.stopping(err)
}

// recall answers the span id measured in the last minute whose file is still cached,
// recording its row again: it may have expired and been collected since. ok is false
// when there is none, or when a schema change took effect inside it meanwhile (then it
// is built again).
func (s *Store) recall(ctx context.Context, id string, req MeasureRequest) (m Measured, ok bool, err error) {
	s.mu.Lock()
	r, ok := s.measured[id]
	s.mu.Unlock()
	if !ok || time.Since(r.at) >= recallFor || !s.o.Cache.Contains(r.m.Key) {
		return Measured{}, false, nil
	}
	lctx, cancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	_, _, _, err = s.record(lctx, r.row, req.TTL, req.Table.Props().LiveTTL)
	cancel()
	switch {
	case errors.Is(err, schemapoints.ErrDecodingMoved):
		s.mu.Lock()
		if s.measured[id].at == r.at {
			delete(s.measured, id)
		}
		s.mu.Unlock()
		return Measured{}, false, nil
	case err != nil:
		return Measured{}, true, err
	}
	return r.m, true, nil
}

// measure builds req's span from Kafka into the cache, records it, and commits it, as
// b; the build waits for a slot. A build that a schema change overtook (a point added
// inside its span, or where it starts, while it was built) is not recorded: it is built
// again with the points as they are then.
func (s *Store) measure(req MeasureRequest, b *flight.Build) (Measured, tailRow, error) {
	for attempt := 1; ; attempt++ {
		m, row, err := s.measureOnce(req, b)
		if !errors.Is(err, schemapoints.ErrDecodingMoved) {
			return m, row, err
		}
		if attempt == maxRebuilds {
			return Measured{}, tailRow{}, apierr.Wrap(apierr.Unavailable, err, "the schema of %s changed %d times while its tail was built; load again", req.Table.FullName(), attempt)
		}
		s.log.Info("a schema change took effect while a tail file was built; building it again", "table", req.Table.FullName(),
			"partition", req.Partition, "start_offset", req.Start, "end_offset", req.End, "error", err)
	}
}

// maxRebuilds bounds the builds of one tail span that schema changes overtake.
const maxRebuilds = 3

// measureOnce is one build of measure.
func (s *Store) measureOnce(req MeasureRequest, fl *flight.Build) (Measured, tailRow, error) {
	ctx, cancel := context.WithTimeout(s.base, s.o.BuildTimeout)
	defer cancel()
	began := time.Now()
	t := req.Table
	fail := func(err error) (Measured, tailRow, error) {
		s.met.buildFailed(ctx, "tail", reasonOf(err))
		return Measured{}, tailRow{}, err
	}
	// A tail decodes with the schema point in force at its start, as every other build
	// of its records does, and ends at the next point (the rest is another file). It
	// never asks the registry: table loads must not depend on it. A record whose schema
	// the table does not know yet (or that needs a newer schema version) ends the tail;
	// indexing learns it within seconds and a later load goes further.
	points, err := s.o.Codecs.Points(ctx, t, req.Partition)
	if errors.Is(err, tablecodec.ErrUnknownSchema) {
		return Measured{End: req.Start, Cut: CutSchema}, tailRow{}, nil
	}
	if err != nil {
		return fail(apierr.Postgres(err, "read the schema of %s", t.FullName()))
	}
	decoding, _ := points.At(req.Start) // the first point is at 0
	settings := tablecodec.SettingsOf(decoding)
	end, cutBy := req.End, ""
	if next := points.Next(req.Start); next < end {
		end, cutBy = next, CutPoint
	}
	dec, err := s.o.Codecs.Decoder(ctx, t, settings)
	if err != nil {
		return fail(apierr.Postgres(err, "read the schema of %s", t.FullName()))
	}
	settingsJSON, err := json.Marshal(settings)
	if err != nil {
		return fail(err)
	}
	release, err := s.buildSlot(fl, TailIdentity(t.Namespace, t.Name, req.Partition, req.Start, req.End))
	if err != nil {
		return Measured{}, tailRow{}, err // no load wants it any more
	}
	defer release()
	// Reserve about what the build may write; the cache evicts more if it writes more.
	p, err := s.o.Cache.Create(min(req.MaxBytes, s.o.Cache.Stats().Max/4))
	if err != nil {
		if errors.Is(err, filecache.ErrNoSpace) {
			err = apierr.Wrap(apierr.ResourceExhausted, err, "no cache space to build a tail file now")
		}
		return fail(err)
	}
	defer p.Abort() // a no-op once committed
	b, err := parquetbuild.NewBuilderFor(p, dec, settings, parquetbuild.WithPages(s.pages))
	if err != nil {
		return fail(err)
	}
	defer b.Abort() // a no-op once closed; else its pages go back to the pool
	// An upsert table's tail file has the latest record per key, as BuildKeyed builds
	// it (a rebuild gives the same bytes, within the same bound of held records), and
	// records the keys it touches.
	add := b.Add
	var latest *upsert.Latest
	if t.Upsert() {
		latest = upsert.NewBounded(dec.KeyHash, upsert.DefaultHold)
		add = func(r record.Record) error { latest.Add(r); return nil }
	}
	read := int64(0)
	err = s.o.Kafka.ReadRange(ctx, t.Topic, req.Partition, req.Start, end, func(r record.Record) error {
		n := int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
		if read > 0 && read+n > req.MaxBytes {
			end, cutBy = r.Offset, CutBytes
			return errCut
		}
		if dec.Check(r).Kind != tablecodec.NeedNothing {
			end, cutBy = r.Offset, CutSchema
			return errCut
		}
		read += n
		return add(r)
	})
	if err != nil && !errors.Is(err, errCut) {
		return fail(s.tailErr(ctx, t, req, err))
	}
	if end == req.Start {
		return Measured{End: end, Read: read, Cut: cutBy}, tailRow{}, nil
	}
	var keys []byte
	if latest != nil {
		k, err := latest.Emit(rangefile.Reread(ctx, s.o.Kafka, t.Topic, req.Partition), b.Add)
		if err != nil {
			return fail(s.tailErr(ctx, t, req, err))
		}
		keys = k.Encode()
	}
	fs, err := b.Close()
	if err != nil {
		return fail(apierr.Failed(err, "build the tail of %s partition %d [%d, %d)", t.FullName(), req.Partition, req.Start, end))
	}
	if fs.Size != p.Written() {
		return fail(apierr.New(apierr.Internal, "build the tail of %s partition %d [%d, %d): measured %d bytes, wrote %d", t.FullName(), req.Partition, req.Start, end, fs.Size, p.Written()))
	}
	stats, err := json.Marshal(fs.Columns)
	if err != nil {
		return fail(err)
	}
	key := layout.DataKey(t.Namespace, t.Name, req.Partition, req.Start, end, fs.SHA256)
	row := tailRow{table: t.ID, key: key, partition: req.Partition, start: req.Start, end: end,
		records: fs.RowCount, size: fs.Size, sha256: fs.SHA256, settings: settingsJSON, stats: stats, keys: keys}
	lctx, lcancel := context.WithTimeout(ctx, s.o.LookupTimeout)
	defer lcancel()
	created, size, sha, err := s.record(lctx, row, req.TTL, t.Props().LiveTTL)
	if err != nil {
		return fail(err)
	}
	if size != fs.Size || sha != fs.SHA256 {
		return fail(apierr.Wrap(apierr.Internal, fmt.Errorf("tail file %s is recorded with %d bytes and sha256 %s, built with %d bytes and sha256 %s", key, size, sha, fs.Size, fs.SHA256),
			"the tail of %s partition %d [%d, %d) is recorded with other bytes than it was built with", t.FullName(), req.Partition, req.Start, end))
	}
	if err := p.Commit(filecache.Entry{Key: key, Size: fs.Size, ETag: objects.ETag(fs.SHA256), LastModified: objects.LastModified(created), TableID: t.ID}); err != nil {
		return fail(apierr.Failed(err, "cache the tail of %s partition %d [%d, %d)", t.FullName(), req.Partition, req.Start, end))
	}
	s.met.built(ctx, "tail")
	s.log.Debug("measured a tail file", "key", key, "table", t.FullName(), "partition", req.Partition,
		"start_offset", req.Start, "end_offset", end, "requested_end", req.End, "records", fs.RowCount,
		"bytes", fs.Size, "elapsed", time.Since(began))
	return Measured{Key: key, End: end, Read: read, Cut: cutBy}, row, nil
}

// record writes a tail file's row, readable for ttl at least (0 < ttl <= maxTTL, the
// table's mink.live.ttl). The row may exist: the same span measured before, or committed
// (same offsets, same bytes). A committed row keeps no expiry of its own; this sets one,
// which only matters once no snapshot of the writer's names the file. An expiry already
// set is kept when later, but never beyond maxTTL from now: whatever any caller asked
// before (a far future, from before measures were bounded), the row is collected at
// most maxTTL after its last measure. It returns what the row records.
func (s *Store) record(ctx context.Context, r tailRow, ttl, maxTTL time.Duration) (created time.Time, size int64, sha string, err error) {
	if ttl <= 0 || ttl > maxTTL {
		return time.Time{}, 0, "", apierr.New(apierr.Internal, "record tail file %s: ttl %v outside (0, %v]", r.key, ttl, maxTTL)
	}
	created, size, sha, err = objects.RecordTail(ctx, s.o.DB, objects.Tail{Table: r.table, Key: r.key, Partition: r.partition,
		Start: r.start, End: r.end, Records: r.records, Size: r.size, SHA256: r.sha256, Settings: r.settings, Stats: r.stats, Keys: r.keys}, ttl, maxTTL)
	if err != nil {
		return time.Time{}, 0, "", apierr.Postgres(err, "record tail file %s", r.key)
	}
	s.Created(r.key)
	return created, size, sha, nil
}

// tailErr says why reading a tail from Kafka failed, naming Kafka when it is Kafka's
// doing.
func (s *Store) tailErr(ctx context.Context, t tables.Table, req MeasureRequest, err error) error {
	where := fmt.Sprintf("topic %q partition %d offsets [%d, %d)", t.Topic, req.Partition, req.Start, req.End)
	switch {
	case errors.Is(err, kafkasrc.ErrUnavailable), errors.Is(err, kafkasrc.ErrUnknownTopic):
		return apierr.Wrap(apierr.Unavailable, err, "cannot build the tail of %s from %s: kafka is unavailable", t.FullName(), where)
	case errors.Is(err, kafkasrc.ErrNotStable), errors.Is(err, kafkasrc.ErrOffsetsGone), errors.Is(err, upsert.ErrChanged):
		// Kafka moved since the load read its offsets (retention, a truncated log);
		// the next load reads them again.
		return apierr.Wrap(apierr.Unavailable, err, "cannot build the tail of %s from %s: kafka's offsets moved since the load read them", t.FullName(), where)
	case errors.Is(err, kafkasrc.ErrClosed), s.base.Err() != nil:
		return apierr.Wrap(apierr.Unavailable, errors.Join(errStopping, err), "cannot build the tail of %s: file server %s", t.FullName(), s.o.NodeID)
	case ctx.Err() != nil:
		return apierr.Wrap(apierr.Unavailable, err, "building the tail of %s from %s took longer than %v", t.FullName(), where, s.o.BuildTimeout)
	}
	return apierr.Failed(err, "build the tail of %s from %s", t.FullName(), where)
}
