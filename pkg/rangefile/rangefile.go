// Package rangefile rebuilds the Parquet file of an indexed range from Kafka: the same
// committed records, the same schema version and registry schemas, the same recorded
// settings, hence the same bytes. A
// rebuild whose size or checksum differs from what indexing recorded is refused, so wrong
// bytes are never served (invariant 3).
package rangefile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/minkhq/mink/pkg/kafkasrc"
	"github.com/minkhq/mink/pkg/parquetbuild"
	"github.com/minkhq/mink/pkg/ranges"
	"github.com/minkhq/mink/pkg/record"
	"github.com/minkhq/mink/pkg/tablecodec"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/upsert"
)

// ErrMismatch: Kafka no longer yields the bytes the index recorded for the range (the
// topic was compacted after indexing, say). The file must be replaced, never served.
var ErrMismatch = errors.New("rebuilt file differs from the indexed one")

// Build writes the Parquet file of range r of table t to w, reading the range from Kafka,
// and checks its size and SHA-256 against the index. On ErrMismatch (or any error) what
// was written to w must be discarded.
func Build(ctx context.Context, kc *kafkasrc.Client, codecs *tablecodec.Codecs, t tables.Table, r ranges.Range, w io.Writer) (parquetbuild.FileStats, error) {
	var s parquetbuild.Settings
	if err := json.Unmarshal(r.Settings, &s); err != nil {
		return parquetbuild.FileStats{}, fmt.Errorf("range [%d, %d) of %s/%d: bad recorded settings: %w", r.Start, r.End, t.FullName(), r.Partition, err)
	}
	fs, err := BuildOffsets(ctx, kc, codecs, t, s, r.Partition, r.Start, r.End, w)
	if err != nil {
		return fs, err
	}
	if fs.Size != r.Size || fs.SHA256 != r.SHA256 {
		return fs, fmt.Errorf("%w: range [%d, %d) of %s partition %d: rebuilt %d bytes sha256 %s, indexed %d bytes sha256 %s",
			ErrMismatch, r.Start, r.End, t.FullName(), r.Partition, fs.Size, fs.SHA256, r.Size, r.SHA256)
	}
	return fs, nil
}

// BuildOffsets writes the Parquet file of offsets [start, end) of one partition with the
// given settings (the schema version and registry ids they name, through codecs): what
// indexing measures, assembly merges, and the file server serves. The file of an upsert
// table has the latest record of each key of the offsets, tombstones left out, in
// offset order (upsert.Latest). opts change how the file is built
// (parquetbuild.WithPages: where its pages wait), never its bytes.
func BuildOffsets(ctx context.Context, kc *kafkasrc.Client, codecs *tablecodec.Codecs, t tables.Table, s parquetbuild.Settings, partition int32, start, end int64, w io.Writer, opts ...parquetbuild.Option) (parquetbuild.FileStats, error) {
	fs, _, err := BuildKeyed(ctx, kc, codecs, t, s, partition, start, end, w, opts...)
	return fs, err
}

// BuildKeyed is BuildOffsets that also returns, for an upsert table, the keys the
// offsets touch (the file's rows' keys in order and the tombstoned ones). It holds at
// most upsert.DefaultHold bytes of latest records: past that, only each key's latest
// offset, and it reads the offsets from Kafka a second time to build the file.
func BuildKeyed(ctx context.Context, kc *kafkasrc.Client, codecs *tablecodec.Codecs, t tables.Table, s parquetbuild.Settings, partition int32, start, end int64, w io.Writer, opts ...parquetbuild.Option) (parquetbuild.FileStats, upsert.Keys, error) {
	dec, err := codecs.Decoder(ctx, t, s)
	if err != nil {
		return parquetbuild.FileStats{}, upsert.Keys{}, err
	}
	b, err := parquetbuild.NewBuilderFor(w, dec, s, opts...)
	if err != nil {
		return parquetbuild.FileStats{}, upsert.Keys{}, err
	}
	add := b.Add
	var latest *upsert.Latest
	if t.Upsert() {
		latest = upsert.NewBounded(dec.KeyHash, upsert.DefaultHold)
		add = func(r record.Record) error { latest.Add(r); return nil }
	}
	if err := kc.ReadRange(ctx, t.Topic, partition, start, end, add); err != nil {
		b.Abort()
		return parquetbuild.FileStats{}, upsert.Keys{}, err
	}
	var keys upsert.Keys
	if latest != nil {
		keys, err = latest.Emit(Reread(ctx, kc, t.Topic, partition), b.Add)
		if err != nil {
			b.Abort()
			return parquetbuild.FileStats{}, upsert.Keys{}, err
		}
	}
	fs, err := b.Close()
	return fs, keys, err
}

// Reread is the upsert.Reread of a partition's records from Kafka: the second read of
// an upsert file's run whose latest records were too many to hold.
func Reread(ctx context.Context, kc *kafkasrc.Client, topic string, partition int32) upsert.Reread {
	return func(from, to int64, fn func(record.Record) error) error {
		return kc.ReadRange(ctx, topic, partition, from, to, fn)
	}
}
