// Package objects is the bucket's objects as Postgres records them: every key a file
// server answers (a mink_data_files or mink_meta_files row), what GET and HEAD say of it
// (size, ETag, last modified), and the listing of the committed ones in S3's key order.
//
// Design notes: docs/design/objects.md.
package objects

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/names"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/tables"
)

// MaxKeys is the most entries (objects and common prefixes) one page lists, as in S3.
const MaxKeys = 1000

// Object is one object as a listing names it and as HEAD describes it.
type Object struct {
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time // what HTTP's Last-Modified says: whole seconds, UTC
}

// ETag is the entity tag of a file with the given SHA-256 (hex): the first 128 bits,
// quoted. It is the same on every node and in every rebuild, and has the shape of an S3
// ETag (32 hex digits) for clients that expect one.
func ETag(sha256hex string) string {
	if len(sha256hex) > 32 {
		sha256hex = sha256hex[:32]
	}
	return `"` + sha256hex + `"`
}

// LastModified is the Last-Modified of a file recorded at created: HTTP dates have whole
// seconds, so a listing says what HEAD says.
func LastModified(created time.Time) time.Time { return created.UTC().Truncate(time.Second) }

// Record is what Postgres records of one key.
type Record struct {
	Key       string
	Data      bool // a data file; else a metadata file (Content holds it)
	TableID   int64
	Partition int32
	Start     int64
	End       int64
	Size      int64
	SHA256    string // data files: recorded at indexing; metadata files: of Content
	Settings  []byte
	Created   time.Time
	Content   []byte
	// DeletesOf is, for a position delete file of an upsert table, the key of the data
	// file it deletes rows of (Partition, Start, End are that file's); CoverEnd the
	// partition offset its deletes were computed up to.
	DeletesOf string
	CoverEnd  int64
	// DeletesTail names, for a live load's delete file, the tail files whose keys stand
	// with the index's for the offsets they span (rangefile.Deletes.Tail).
	DeletesTail []string
}

// Lookup reads what Postgres records of key: a NotFound error when nothing does.
func Lookup(ctx context.Context, db pg.DB, key string) (Record, error) {
	r := Record{Key: key}
	var kind string
	err := db.QueryRow(ctx, `
		SELECT 'data', table_id, partition, start_offset, end_offset, file_size, sha256, settings, created_at, NULL::bytea,
		       coalesce(deletes_of, ''), coalesce(cover_end, 0), coalesce(deletes_tail, '{}')
		  FROM mink_data_files WHERE key = $1
		UNION ALL
		SELECT 'meta', table_id, 0, 0, 0, octet_length(content), sha256, NULL::jsonb, created_at, content, '', 0, '{}'::text[]
		  FROM mink_meta_files WHERE key = $1
		LIMIT 1`, key).Scan(&kind, &r.TableID, &r.Partition, &r.Start, &r.End, &r.Size, &r.SHA256, &r.Settings, &r.Created, &r.Content,
		&r.DeletesOf, &r.CoverEnd, &r.DeletesTail)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, notFound(key)
	}
	r.Data = kind == "data"
	return r, err
}

func notFound(key string) error {
	return apierr.New(apierr.NotFound, "no file %s in bucket %s", key, layout.Bucket)
}

// Cursor is where a listing resumes: after Key, or with PastPrefix after every key that
// begins with Key (a common prefix already listed).
type Cursor struct {
	Key        string
	PastPrefix bool
}

// StartAfter is the cursor of S3's start-after (or marker) key in a listing by prefix and
// delimiter: after the key, or, when the key is one of the listing's common prefixes
// (a NextMarker, say), after all of that prefix, which was listed already.
func StartAfter(key, prefix, delimiter string) Cursor {
	if delimiter != "" && strings.HasPrefix(key, prefix) {
		rest := key[len(prefix):]
		if i := strings.Index(rest, delimiter); i >= 0 && i+len(delimiter) == len(rest) {
			return Cursor{Key: key, PastPrefix: true}
		}
	}
	return Cursor{Key: key}
}

// Query is one page of a listing.
type Query struct {
	Prefix    string // only keys that begin with it
	Delimiter string // "": none; else keys with it after Prefix are rolled up into common prefixes
	After     Cursor // start after it (the zero Cursor: from the start)
	Max       int    // entries on the page, at most MaxKeys
	// Tables are the tables whose files may be listed (those the caller may read); the
	// files of any other table are left out.
	Tables []tables.Table
}

// Listing is one page: objects and common prefixes in key order (each list sorted; the
// two interleave by key), at most Query.Max of them together.
type Listing struct {
	Objects        []Object
	CommonPrefixes []string
	Truncated      bool   // more follows: resume at Next
	Next           Cursor // the last entry of the page
}

// List lists one page of the committed objects of q.Tables, sorted by key as S3 sorts
// them (UTF-8 bytes), whatever the database's collation. Each table is read in keyset
// pages of at most q.Max+1 rows (an index scan from the cursor), and a common prefix's
// keys are skipped by starting after them, so a page costs about q.Max rows and at most
// one query per entry and per table, however many files a table holds.
func List(ctx context.Context, db pg.DB, q Query) (Listing, error) {
	if q.Max > MaxKeys {
		q.Max = MaxKeys
	}
	var out Listing
	switch {
	case !names.Storable(q.Prefix):
		return out, apierr.Invalid("prefix", "%q is not UTF-8 without NUL, as keys are", q.Prefix)
	case !names.Storable(q.After.Key):
		return out, apierr.Invalid("start-after", "%q is not UTF-8 without NUL, as keys are", q.After.Key)
	case q.Max <= 0:
		return out, nil // S3 answers max-keys=0 with an empty page, not truncated
	}
	ts := make([]tables.Table, len(q.Tables))
	copy(ts, q.Tables)
	sort.Slice(ts, func(i, j int) bool {
		return layout.TablePrefix(ts[i].Namespace, ts[i].Name) < layout.TablePrefix(ts[j].Namespace, ts[j].Name)
	})
	cur := q.After
	lastPrefix := ""
	// add puts one entry on the page; false when the page was full already (there is
	// more: the page is truncated).
	add := func(o *Object, prefix string) bool {
		if len(out.Objects)+len(out.CommonPrefixes) == q.Max {
			out.Truncated, out.Next = true, cur
			return false
		}
		if o != nil {
			out.Objects = append(out.Objects, *o)
			cur = Cursor{Key: o.Key}
		} else {
			out.CommonPrefixes = append(out.CommonPrefixes, prefix)
			cur, lastPrefix = Cursor{Key: prefix, PastPrefix: true}, prefix
		}
		return true
	}
	for _, t := range ts {
		tp := layout.TablePrefix(t.Namespace, t.Name)
		// Both are prefixes: their key ranges nest or are apart.
		lo := q.Prefix
		switch {
		case strings.HasPrefix(tp, q.Prefix):
			lo = tp
		case !strings.HasPrefix(q.Prefix, tp):
			continue
		}
		hi, bounded := prefixEnd(lo)
		for {
			from, after, ok := bounds(lo, cur)
			if !ok || bounded && (hi <= from || hi <= after) {
				break // the cursor is past this table
			}
			limit := q.Max - len(out.Objects) - len(out.CommonPrefixes) + 1
			objs, err := page(ctx, db, t.ID, from, after, hi, bounded, limit)
			if err != nil {
				return Listing{}, fmt.Errorf("list the files of table %s: %w", t.FullName(), err)
			}
			for i := range objs {
				o := &objs[i]
				if q.Delimiter != "" && strings.HasPrefix(o.Key, q.Prefix) {
					rest := o.Key[len(q.Prefix):]
					if j := strings.Index(rest, q.Delimiter); j >= 0 {
						cp := o.Key[:len(q.Prefix)+j+len(q.Delimiter)]
						if cp == lastPrefix {
							continue
						}
						if !add(nil, cp) {
							return out, nil
						}
						continue
					}
				}
				if !add(o, "") {
					return out, nil
				}
			}
			if len(objs) < limit {
				break // this table has no more
			}
			// A full batch read on from the cursor: past the last key, or past every key
			// of the last common prefix.
		}
	}
	return out, nil
}

// bounds turns a lower key bound lo and cursor c into the query's: keys >= from and keys >
// after. ok is false when nothing can follow c.
func bounds(lo string, c Cursor) (from, after string, ok bool) {
	from = lo
	switch {
	case c.PastPrefix:
		end, bounded := prefixEnd(c.Key)
		if !bounded {
			return "", "", false
		}
		from = max(from, end)
	default:
		after = c.Key
	}
	return from, after, true
}

// page reads up to limit committed objects of one table with keys >= from, > after and
// (when bounded) < to, in bytewise key order.
func page(ctx context.Context, db pg.DB, table int64, from, after, to string, bounded bool, limit int) ([]Object, error) {
	sql := pageSQL
	args := []any{table, from, after, limit}
	if bounded {
		sql = pageSQLBounded
		args = append(args, to)
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Object, error) {
		var o Object
		var sha string
		var created time.Time
		err := r.Scan(&o.Key, &o.Size, &sha, &created)
		o.ETag, o.LastModified = ETag(sha), LastModified(created)
		return o, err
	})
}

// pageTemplate reads both tables through their listing indexes (migration 0008): an
// index scan from the cursor, in the "C" collation's byte order, stopping at limit rows.
const pageTemplate = `
	SELECT key, size, sha256, created_at FROM (
		(SELECT key, file_size AS size, sha256, created_at FROM mink_data_files
		  WHERE table_id = $1 AND NOT live
		    AND key COLLATE "C" >= $2 AND key COLLATE "C" > $3 %s
		  ORDER BY key COLLATE "C" LIMIT $4)
		UNION ALL
		(SELECT key, octet_length(content), sha256, created_at FROM mink_meta_files
		  WHERE table_id = $1 AND expires_at IS NULL
		    AND key COLLATE "C" >= $2 AND key COLLATE "C" > $3 %s
		  ORDER BY key COLLATE "C" LIMIT $4)
	) f ORDER BY key COLLATE "C" LIMIT $4`

var (
	pageSQL        = fmt.Sprintf(pageTemplate, "", "")
	pageSQLBounded = fmt.Sprintf(pageTemplate, upperBound, upperBound)
)

const upperBound = `AND key COLLATE "C" < $5`

// prefixEnd is the least string greater than every string that begins with p, in UTF-8
// byte order (which is code point order): p with its last character replaced by the next
// one. bounded is false when there is none (p is empty, or all U+10FFFF).
func prefixEnd(p string) (string, bool) {
	for p != "" {
		r, n := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-n]
		switch {
		case r == utf8.MaxRune:
			continue // no next character: carry to the one before
		case r == 0xD7FF:
			r = 0xE000 // skip the surrogates, which UTF-8 cannot hold
		default:
			r++
		}
		return p + string(r), true
	}
	return "", false
}
