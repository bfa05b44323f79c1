package objects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/icebergmeta"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/ranges"
)

// Live table loads (services/fileserver/internal/live):
// the tail files a load can name, and load snapshots recorded so that other loads read
// them instead of writing their own. A load snapshot's metadata JSON row carries its
// content key (table, committed metadata, settings, tail spans), its stream (the same
// without the spans) and the database time before its Kafka offsets were read.

// Span is one partition's tail: offsets [Start, End).
type Span struct {
	Partition  int32
	Start, End int64
}

func scanFile(r pgx.CollectableRow, f *icebergmeta.DataFile, key *string) error {
	return r.Scan(key, &f.Partition, &f.Start, &f.End, &f.Records, &f.Size, &f.SHA256, &f.Settings, &f.Stats)
}

// LoadCandidates returns what may make up spans of table: the indexed ranges within them
// (Key empty: the caller names their files) and the unexpired tail files within them;
// keyed (an upsert table's load, whose deletes read the tail files' keys): only those
// with keys recorded (one measured by a file server from before upsert tails recorded
// none is measured again, which records them).
func LoadCandidates(ctx context.Context, db pg.DB, table int64, spans []Span, keyed bool) (indexed, tails []icebergmeta.DataFile, err error) {
	ps, los, his := make([]int32, len(spans)), make([]int64, len(spans)), make([]int64, len(spans))
	for i, s := range spans {
		ps[i], los[i], his[i] = s.Partition, s.Start, s.End
	}
	read := func(sql string, args ...any) ([]icebergmeta.DataFile, error) {
		rows, err := db.Query(ctx, sql, append([]any{table, ps, los, his}, args...)...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(r pgx.CollectableRow) (icebergmeta.DataFile, error) {
			var f icebergmeta.DataFile
			err := scanFile(r, &f, &f.Key)
			return f, err
		})
	}
	rs, err := ranges.Within(ctx, db, table, ps, los, his)
	if err != nil {
		return nil, nil, err
	}
	indexed = make([]icebergmeta.DataFile, len(rs))
	for i, r := range rs {
		indexed[i] = icebergmeta.DataFile{Partition: r.Partition, Start: r.Start, End: r.End, Records: r.Records, Size: r.Size,
			SHA256: r.SHA256, Settings: r.Settings, Stats: r.Stats}
	}
	tails, err = read(`SELECT f.key, f.partition, f.start_offset, f.end_offset, f.record_count, f.file_size, f.sha256, f.settings, f.stats
		FROM mink_data_files f JOIN unnest($2::int[], $3::bigint[], $4::bigint[]) AS s(p, lo, hi)
		  ON f.partition = s.p AND f.start_offset >= s.lo AND f.end_offset <= s.hi
		WHERE f.table_id = $1 AND f.expires_at > now() AND (NOT $5 OR f.keys IS NOT NULL)`, keyed)
	return indexed, tails, err
}

// StoredLoad is a recorded load snapshot: its metadata JSON.
type StoredLoad struct {
	Key     string
	Content []byte
}

// NewestLoad returns the newest load snapshot of stream whose offsets were read less than
// bound ago, with how long ago (both by the database's clock), and the database's time
// now either way.
func NewestLoad(ctx context.Context, db pg.DB, table int64, stream string, bound time.Duration) (s StoredLoad, age time.Duration, now time.Time, found bool, err error) {
	var key *string
	var ageMs *float64
	err = db.QueryRow(ctx, `SELECT n.now, f.key, f.content, (extract(epoch FROM n.now - f.load_read_at) * 1000)::float8
		FROM (SELECT clock_timestamp() AS now) n
		LEFT JOIN LATERAL (SELECT key, content, load_read_at FROM mink_meta_files
		  WHERE table_id = $1 AND load_stream = $2 AND load_read_at > n.now - $3::float8 * interval '1 millisecond'
		    AND expires_at > n.now
		  ORDER BY load_read_at DESC LIMIT 1) f ON true`,
		table, stream, float64(bound.Milliseconds())).Scan(&now, &key, &s.Content, &ageMs)
	if err != nil || key == nil {
		return StoredLoad{}, 0, now, false, err
	}
	s.Key = *key
	return s, time.Duration(*ageMs * float64(time.Millisecond)), now, true, nil
}

// LoadByContent returns the load snapshot recorded under loadKey that stays readable at
// least minLeft from now.
func LoadByContent(ctx context.Context, db pg.DB, table int64, loadKey string, minLeft time.Duration) (StoredLoad, bool, error) {
	var s StoredLoad
	err := db.QueryRow(ctx, `SELECT key, content FROM mink_meta_files
		WHERE table_id = $1 AND load_key = $2 AND expires_at > now() + $3::float8 * interval '1 millisecond'`,
		table, loadKey, float64(minLeft.Milliseconds())).Scan(&s.Key, &s.Content)
	if errors.Is(err, pgx.ErrNoRows) {
		return StoredLoad{}, false, nil
	}
	return s, err == nil, err
}

// ErrLoadExists: another load recorded the same content key first (read it with LoadByContent).
var ErrLoadExists = errors.New("objects: a load snapshot with this content key is recorded already")

// Load is a load snapshot to record.
type Load struct {
	Table     int64
	LoadKey   string
	Stream    string
	ReadAt    *time.Time // nil: never stands for a later load of its stream
	TTL       time.Duration
	ReuseFrom time.Duration // a row of LoadKey readable for less than this is stale: it gives up its key
	Tail      []icebergmeta.DataFile
	Deletes   []LoadDelete       // an upsert table's position delete files
	Meta      []icebergmeta.File // the metadata JSON last
}

// LoadDelete is a live load's position delete file (File.DeletesOf names its data file)
// and the tail files whose recorded keys it was computed with (rangefile.Deletes.Tail).
type LoadDelete struct {
	File icebergmeta.DataFile
	Tail []string
}

// SaveLoad records l in one transaction: its tail files' rows expire no sooner than now +
// TTL (a row collected meanwhile is written again), its metadata files expire then, and
// its metadata JSON row carries the keys. A stale row of the same content key (readable
// for less than ReuseFrom) gives up its key; a fresh one makes SaveLoad return ErrLoadExists
// and write nothing.
func SaveLoad(ctx context.Context, db pg.DB, l Load) error {
	if len(l.Meta) == 0 {
		return errors.New("objects: a load has metadata files")
	}
	ms := float64(l.TTL.Milliseconds())
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE mink_meta_files SET load_key = NULL
			WHERE table_id = $1 AND load_key = $2 AND expires_at <= now() + $3::float8 * interval '1 millisecond'`,
			l.Table, l.LoadKey, float64(l.ReuseFrom.Milliseconds())); err != nil {
			return err
		}
		js := l.Meta[len(l.Meta)-1]
		tag, err := tx.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content, expires_at, load_key, load_stream, load_read_at)
			VALUES ($1, $2, $3, now() + $4::float8 * interval '1 millisecond', $5, $6, $7)
			ON CONFLICT (table_id, load_key) WHERE load_key IS NOT NULL DO NOTHING`,
			l.Table, js.Key, js.Content, ms, l.LoadKey, l.Stream, l.ReadAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrLoadExists
		}
		b := &pgx.Batch{}
		for _, f := range l.Tail {
			b.Queue(`INSERT INTO mink_data_files (table_id, key, partition, start_offset, end_offset, record_count,
					file_size, sha256, settings, stats, expires_at, live)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + $11::float8 * interval '1 millisecond', true)
				ON CONFLICT (key) DO UPDATE SET expires_at = GREATEST(mink_data_files.expires_at, EXCLUDED.expires_at)`,
				l.Table, f.Key, f.Partition, f.Start, f.End, f.Records, f.Size, f.SHA256, f.Settings, f.Stats, ms)
		}
		// A delete file of the same bytes may be recorded already: the writer's (from
		// the index alone, which it keeps), or another load's, whose tail files may
		// expire before this load's: it then takes this load's.
		for _, d := range l.Deletes {
			f := d.File
			b.Queue(`INSERT INTO mink_data_files (table_id, key, partition, start_offset, end_offset, record_count,
					file_size, sha256, settings, stats, expires_at, live, deletes_of, cover_end, deletes_tail)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + $11::float8 * interval '1 millisecond', true, $12, $13, $14)
				ON CONFLICT (key) DO UPDATE SET expires_at = GREATEST(mink_data_files.expires_at, EXCLUDED.expires_at),
					deletes_tail = CASE WHEN mink_data_files.deletes_tail IS NULL THEN NULL ELSE EXCLUDED.deletes_tail END`,
				l.Table, f.Key, f.Partition, f.Start, f.End, f.Records, f.Size, f.SHA256, f.Settings, f.Stats, ms,
				f.DeletesOf, f.CoverEnd, d.Tail)
		}
		for _, f := range l.Meta[:len(l.Meta)-1] {
			b.Queue(`INSERT INTO mink_meta_files (table_id, key, content, expires_at)
				VALUES ($1, $2, $3, now() + $4::float8 * interval '1 millisecond')`, l.Table, f.Key, f.Content, ms)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		return keepKeyed(ctx, tx, l, ms)
	})
}

// ErrTailGone: a tail file whose recorded keys a load's delete files need was collected
// before the load was recorded (or written again without them): load again.
var ErrTailGone = errors.New("objects: a tail file of the load was collected meanwhile")

// keepKeyed makes the tail files l's delete files read the keys of (rows or not) expire
// no sooner than the load, and checks they are all there with their keys.
func keepKeyed(ctx context.Context, tx pgx.Tx, l Load, ms float64) error {
	set := map[string]bool{}
	for _, d := range l.Deletes {
		for _, k := range d.Tail {
			set[k] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	tag, err := tx.Exec(ctx, `UPDATE mink_data_files
		SET expires_at = GREATEST(expires_at, now() + $2::float8 * interval '1 millisecond')
		WHERE key = ANY($1) AND keys IS NOT NULL`, keys, ms)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != int64(len(keys)) {
		return ErrTailGone
	}
	return nil
}

// TailKeys returns the keys of live loads' tail files (mink_data_files rows) by key, in
// the order of keys: an error names one that is gone or has no keys recorded.
func TailKeys(ctx context.Context, db pg.DB, keys []string) ([]ranges.RangeKeys, error) {
	rows, err := db.Query(ctx, `SELECT key, start_offset, end_offset, keys FROM mink_data_files WHERE key = ANY($1)`, keys)
	if err != nil {
		return nil, err
	}
	byKey := map[string]ranges.RangeKeys{}
	_, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		var k string
		var r ranges.RangeKeys
		err := row.Scan(&k, &r.Start, &r.End, &r.Keys)
		byKey[k] = r
		return struct{}{}, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ranges.RangeKeys, len(keys))
	for i, k := range keys {
		r, ok := byKey[k]
		if !ok || r.Keys == nil {
			return nil, fmt.Errorf("tail file %s: no keys recorded (collected, or not an upsert tail)", k)
		}
		out[i] = r
	}
	return out, nil
}
