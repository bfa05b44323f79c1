package objects

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/pg"
	"github.com/minkhq/mink/pkg/pgschema"
	"github.com/minkhq/mink/pkg/pgtest"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/pkg/tableschema"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Shutdown()
	os.Exit(code)
}

// bucket is a database with tables and files in it, and the keys a listing must name.
type bucket struct {
	db     *pgxpool.Pool
	tables map[string]tables.Table // by "namespace.name"
	listed []string                // committed keys, sorted bytewise
}

// newDB is a fresh, migrated database on the shared cluster; with icu, its collation is
// ICU's en-US, which sorts text unlike UTF-8 bytes (case and punctuation aside).
func newDB(t *testing.T, icu bool) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	var db *pgxpool.Pool
	if !icu {
		db, _ = pgtest.DB(t)
	} else {
		admin, err := pgtest.SharedURL()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		var b [6]byte
		rand.Read(b[:])
		name := "mink_test_icu_" + hex.EncodeToString(b[:])
		_, err = conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'")
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgxpool.ParseConfig(admin)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.Database = name
		if db, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
	}
	if err := pgschema.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db
}

// Keys whose UTF-8 byte order differs from a natural-language collation's: case,
// punctuation ("-" before "/" before "0" before "="), and characters beyond ASCII.
var (
	tableNames = []string{"ns.a", "ns.a-b", "ns.B", "ns.b", "Zed.t", "zed.t", "ns._u"}
	dataNames  = []string{"x", "X", "a b", "a+b", "é", "日本", "e", "~", "a=1", "a-1", "a/1", "a.1"}
)

func newBucket(t *testing.T, icu bool) *bucket {
	t.Helper()
	ctx := context.Background()
	b := &bucket{db: newDB(t, icu), tables: map[string]tables.Table{}}
	for i, full := range tableNames {
		ns, name, _ := strings.Cut(full, ".")
		tbl, err := tables.Create(ctx, b.db, tables.Table{Namespace: ns, Name: name, Topic: fmt.Sprintf("topic-%d", i),
			Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, 2)
		if err != nil {
			t.Fatal(err)
		}
		b.tables[full] = tbl
		for p := range int32(2) {
			for j, n := range dataNames {
				key := layout.TablePrefix(ns, name) + fmt.Sprintf("data/_kafka_partition=%d/%s.parquet", p, n)
				b.addData(t, tbl, key, p, int64(j), committed)
			}
			// A live load's tail file: readable, never listed.
			b.addData(t, tbl, layout.TablePrefix(ns, name)+fmt.Sprintf("data/_kafka_partition=%d/tail.parquet", p), p, 100, tail)
			// A committed file a live load measured again: its expiry (past now) keeps it
			// for that load; it is committed, and listed.
			b.addData(t, tbl, layout.TablePrefix(ns, name)+fmt.Sprintf("data/_kafka_partition=%d/remeasured.parquet", p), p, 101, remeasured)
		}
		for _, n := range []string{"00001-a.metadata.json", "00002-b.metadata.json", "snap-1.avro", "m1.avro", "M1.avro"} {
			b.addMeta(t, tbl, layout.MetadataKey(ns, name, n), false)
		}
		b.addMeta(t, tbl, layout.MetadataKey(ns, name, "live/00003-c.metadata.json"), true)
	}
	slices.Sort(b.listed) // Go compares strings bytewise, as S3 sorts keys
	return b
}

// How a data file's row came to be: as the writer's commit writes it, as a live load
// records a tail, or committed and then measured again by a live load.
const (
	committed = iota
	tail
	remeasured
)

func (b *bucket) addData(t *testing.T, tbl tables.Table, key string, p int32, start int64, how int) {
	t.Helper()
	sum := sha256.Sum256([]byte(key))
	var expires *time.Time
	switch how {
	case tail:
		e := time.Now().Add(time.Hour)
		expires = &e
	case remeasured:
		e := time.Now().Add(-time.Minute)
		expires = &e
	}
	settings, _ := json.Marshal(map[string]any{})
	_, err := b.db.Exec(context.Background(), `INSERT INTO mink_data_files
		(table_id, key, partition, start_offset, end_offset, record_count, file_size, sha256, settings, stats, created_at, expires_at, live)
		VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, '{}', now() - $10 * interval '1 second', $9, $11)`,
		tbl.ID, key, p, start, start+1, 1000+len(key), hex.EncodeToString(sum[:]), settings, expires, float64(len(key)), how == tail)
	if err != nil {
		t.Fatal(err)
	}
	if how != tail {
		b.listed = append(b.listed, key)
	}
}

func (b *bucket) addMeta(t *testing.T, tbl tables.Table, key string, live bool) {
	t.Helper()
	var expires *time.Time
	if live {
		e := time.Now().Add(time.Hour)
		expires = &e
	}
	content := strings.Repeat(key, 3)
	if _, err := b.db.Exec(context.Background(), `INSERT INTO mink_meta_files (table_id, key, content, expires_at) VALUES ($1, $2, $3, $4)`,
		tbl.ID, key, []byte(content), expires); err != nil {
		t.Fatal(err)
	}
	if !live {
		b.listed = append(b.listed, key)
	}
}

func (b *bucket) all() []tables.Table {
	var ts []tables.Table
	for _, t := range b.tables {
		ts = append(ts, t)
	}
	return ts
}

func keysOf(l Listing) []string {
	var out []string
	for _, o := range l.Objects {
		out = append(out, o.Key)
	}
	return out
}

// entry is an object ("K" and its key) or a common prefix ("P" and it).
type entry struct{ kind, s string }

// model is the whole listing S3 answers for keys (sorted), by the rules S3 documents.
func model(keys []string, prefix, delim string, after Cursor) []entry {
	var out []entry
	last := ""
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) || after.PastPrefix && (k < after.Key || strings.HasPrefix(k, after.Key)) ||
			!after.PastPrefix && k <= after.Key {
			continue
		}
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				cp := k[:len(prefix)+i+len(delim)]
				if cp != last {
					out = append(out, entry{"P", cp})
					last = cp
				}
				continue
			}
		}
		out = append(out, entry{"K", k})
	}
	return out
}

// diff says where got first differs from want.
func diff(got, want []entry) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("%d entries, want %d; from entry %d, got %v, want %v", len(got), len(want), i,
		got[i:min(len(got), i+3)], want[i:min(len(want), i+3)])
}

// walk lists every page from after on, max entries a page, and returns the entries in
// order, checking each page's bounds and order.
func walk(t *testing.T, db pg.DB, q Query) []entry {
	t.Helper()
	var out []entry
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%+v: no end after 1000 pages", q)
		}
		l, err := List(context.Background(), db, q)
		if err != nil {
			t.Fatal(err)
		}
		var page []entry
		for _, o := range l.Objects {
			page = append(page, entry{"K", o.Key})
		}
		for _, p := range l.CommonPrefixes {
			page = append(page, entry{"P", p})
		}
		slices.SortFunc(page, func(a, b entry) int { return strings.Compare(a.s, b.s) })
		if len(page) > q.Max || l.Truncated && len(page) != q.Max {
			t.Fatalf("%+v: a page of %d entries, truncated %v", q, len(page), l.Truncated)
		}
		out = append(out, page...)
		if !l.Truncated {
			return out
		}
		last := page[len(page)-1]
		if l.Next != (Cursor{Key: last.s, PastPrefix: last.kind == "P"}) {
			t.Fatalf("%+v: next %+v, the page ends with %+v", q, l.Next, last)
		}
		q.After = l.Next
	}
}

// TestListMatchesS3: every listing (prefix, delimiter, start, page size), walked page by
// page, is exactly S3's listing of the committed keys, in UTF-8 byte order, whatever the
// database's collation; live loads' files are never named; sizes, ETags and times are
// those Lookup (what GET and HEAD serve) gives.
func TestListMatchesS3(t *testing.T) {
	t.Parallel()
	for _, icu := range []bool{false, true} {
		t.Run(fmt.Sprintf("icu=%v", icu), func(t *testing.T) {
			b := newBucket(t, icu)
			ctx := context.Background()
			if icu {
				// The test means something: this database's own order is not S3's.
				rows, _ := b.db.Query(ctx, `SELECT key FROM mink_data_files WHERE NOT live
					UNION ALL SELECT key FROM mink_meta_files WHERE expires_at IS NULL ORDER BY 1`)
				own, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil || slices.Equal(own, b.listed) {
					t.Fatalf("the ICU database sorts keys bytewise (%v): the test would prove nothing", err)
				}
			}
			all := b.all()

			whole := walk(t, b.db, Query{Max: MaxKeys, Tables: all})
			want := model(b.listed, "", "", Cursor{})
			if !slices.Equal(whole, want) {
				t.Fatalf("the whole listing: %s", diff(whole, want))
			}
			l, err := List(ctx, b.db, Query{Max: MaxKeys, Tables: all})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range l.Objects {
				r, err := Lookup(ctx, b.db, o.Key)
				if err != nil || o.Size != r.Size || o.ETag != ETag(r.SHA256) || !o.LastModified.Equal(LastModified(r.Created)) ||
					o.LastModified.Nanosecond() != 0 {
					t.Errorf("%s: listed %+v, looked up %+v %v", o.Key, o, r, err)
				}
				if !r.Data {
					sum := sha256.Sum256(r.Content)
					if r.SHA256 != hex.EncodeToString(sum[:]) || r.Size != int64(len(r.Content)) {
						t.Errorf("%s: the metadata file's checksum %s and size %d are not its content's", o.Key, r.SHA256, r.Size)
					}
				}
			}
			// A tail is readable (GET serves it) but not listed.
			tailKey := layout.TablePrefix("ns", "a") + "data/_kafka_partition=0/tail.parquet"
			if _, err := Lookup(ctx, b.db, tailKey); err != nil || slices.Contains(keysOf(l), tailKey) {
				t.Errorf("tail file: %v", err)
			}
			if re := layout.TablePrefix("ns", "a") + "data/_kafka_partition=0/remeasured.parquet"; !slices.Contains(keysOf(l), re) {
				t.Errorf("a committed file measured again by a live load is not listed")
			}
			if _, err := Lookup(ctx, b.db, "ns/a/data/none"); apierr.Classify(err) != apierr.NotFound {
				t.Errorf("unknown key: %v", err)
			}

			prefixes := []string{"", "n", "ns/", "ns/a", "ns/a/", "ns/a-b/", "ns/a/data/", "ns/a/data/_kafka_partition=1/",
				"ns/a/data/_kafka_partition=1/a", "ns/b/metadata/", "Z", "zed/t/metadata/0", "ns/a/data/_kafka_partition=0/日", "nope/", "ns/a/x"}
			delims := []string{"", "/", "=", "a", "/m", ".parquet"}
			starts := []string{"", "ns/a-b/zzz", "ns/a/", "ns/a/data/_kafka_partition=0/", "ns/a/data/_kafka_partition=0/é.parquet", "ns/b", "zzz", "ns/a/data/"}
			for _, prefix := range prefixes {
				for _, delim := range delims {
					for _, start := range starts {
						after := StartAfter(start, prefix, delim)
						want := model(b.listed, prefix, delim, after)
						for _, max := range []int{1, 2, 5, MaxKeys} {
							got := walk(t, b.db, Query{Prefix: prefix, Delimiter: delim, After: after, Max: max, Tables: all})
							if !slices.Equal(got, want) {
								t.Fatalf("prefix %q delimiter %q start %+v max %d: %s", prefix, delim, after, max, diff(got, want))
							}
						}
					}
				}
			}
		})
	}
}

// TestListReadableTables: a listing names the files of the tables it is given only.
func TestListReadableTables(t *testing.T) {
	t.Parallel()
	b := newBucket(t, false)
	some := []tables.Table{b.tables["ns.a-b"], b.tables["zed.t"]}
	var want []string
	for _, k := range b.listed {
		if strings.HasPrefix(k, "ns/a-b/") || strings.HasPrefix(k, "zed/t/") {
			want = append(want, k)
		}
	}
	got := walk(t, b.db, Query{Max: 3, Tables: some})
	if !slices.Equal(got, model(want, "", "", Cursor{})) {
		t.Errorf("two tables: %v", got)
	}
	got = walk(t, b.db, Query{Max: 3, Delimiter: "/", Tables: some})
	if !slices.Equal(got, []entry{{"P", "ns/"}, {"P", "zed/"}}) {
		t.Errorf("two tables' namespaces: %v", got)
	}
	if got := walk(t, b.db, Query{Max: 3}); len(got) != 0 {
		t.Errorf("no table: %v", got)
	}
	if got := walk(t, b.db, Query{Max: 3, Prefix: "ns/a/", Tables: some}); len(got) != 0 {
		t.Errorf("a table not given, by prefix: %v", got)
	}
}

// countingDB counts the queries and rows of a listing.
type countingDB struct {
	pg.DB
	queries int
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.queries++
	return c.DB.Query(ctx, sql, args...)
}

// TestListBounded: a table of 100,000 files lists a page with a query or two, each an
// index scan of the listing indexes that reads about a page of rows, with or without a
// delimiter that rolls them all into one prefix.
func TestListBounded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("inserts 100,000 rows")
	}
	db := newDB(t, false)
	ctx := context.Background()
	tbl, err := tables.Create(ctx, db, tables.Table{Namespace: "ns", Name: "big", Topic: "big", Spec: tableschema.Spec{Format: tableschema.FormatRaw}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	if _, err := db.Exec(ctx, `INSERT INTO mink_data_files
		(table_id, key, partition, start_offset, end_offset, record_count, file_size, sha256, settings, stats)
		SELECT $1, format('ns/big/data/_kafka_partition=0/%s.parquet', lpad(i::text, 20, '0')), 0, i, i + 1, 1, 100,
		       encode(sha256(i::text::bytea), 'hex'), '{}', '{}'
		  FROM generate_series(0, $2 - 1) AS i`, tbl.ID, n); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO mink_meta_files (table_id, key, content) VALUES ($1, 'ns/big/metadata/v1.metadata.json', '{}')`, tbl.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `ANALYZE mink_data_files; ANALYZE mink_meta_files`); err != nil {
		t.Fatal(err)
	}

	// The plan of a page: an index scan that stops at the limit, no sort of the table.
	var plan string
	if err := db.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+pageSQL, tbl.ID, "", "ns/big/data/_kafka_partition=0/00000000000000050000", 1001).
		Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "mink_data_files_listing") {
		t.Errorf("a page does not read the listing indexes:\n%s", plan)
	}
	if rows := planRows(t, plan, "mink_data_files"); rows > 1001 {
		t.Errorf("a page read %d rows of mink_data_files, want at most 1001:\n%s", rows, plan)
	}

	c := &countingDB{DB: db}
	l, err := List(ctx, c, Query{Prefix: "ns/big/data/", Max: MaxKeys, Tables: []tables.Table{tbl},
		After: Cursor{Key: "ns/big/data/_kafka_partition=0/00000000000000050000.parquet"}})
	if err != nil || len(l.Objects) != MaxKeys || !l.Truncated || c.queries != 1 ||
		l.Objects[0].Key != "ns/big/data/_kafka_partition=0/00000000000000050001.parquet" {
		t.Errorf("a page from the middle: %d objects, truncated %v, %d queries, %v", len(l.Objects), l.Truncated, c.queries, err)
	}
	c.queries = 0
	l, err = List(ctx, c, Query{Delimiter: "/", Prefix: "ns/big/", Max: MaxKeys, Tables: []tables.Table{tbl}})
	if err != nil || !slices.Equal(l.CommonPrefixes, []string{"ns/big/data/", "ns/big/metadata/"}) || len(l.Objects) != 0 || l.Truncated || c.queries > 3 {
		t.Errorf("by delimiter: %v, %d queries, %v", l.CommonPrefixes, c.queries, err)
	}
}

// planRows is the rows the scans of table produced in an EXPLAIN ANALYZE JSON plan.
func planRows(t *testing.T, plan, table string) int {
	t.Helper()
	var p []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &p); err != nil || len(p) != 1 {
		t.Fatalf("plan: %v", err)
	}
	total := 0
	var visit func(n map[string]any)
	visit = func(n map[string]any) {
		if n["Relation Name"] == table {
			total += int(n["Actual Rows"].(float64))
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				visit(k.(map[string]any))
			}
		}
	}
	visit(p[0].Plan)
	return total
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		p, end string
		ok     bool
	}{
		{"a", "b", true},
		{"ns/a/", "ns/a0", true},
		{"a\U0010FFFF", "b", true},
		{"\uD7FF", "\uE000", true},
		{"é", "ê", true},
		{"", "", false},
		{"\U0010FFFF\U0010FFFF", "", false},
	} {
		end, ok := prefixEnd(c.p)
		if end != c.end || ok != c.ok {
			t.Errorf("prefixEnd(%q) = %q %v, want %q %v", c.p, end, ok, c.end, c.ok)
		}
		if ok && !utf8.ValidString(end) {
			t.Errorf("prefixEnd(%q) = %q: not UTF-8", c.p, end)
		}
	}
	// Every string with the prefix sorts below its end; every other one at or above the
	// prefix sorts at or above it.
	for _, p := range []string{"a", "ns/a/", "é", "a\U0010FFFF"} {
		end, _ := prefixEnd(p)
		for _, s := range []string{p, p + "\x01", p + "\U0010FFFF\U0010FFFF", p + "zzz"} {
			if s >= end {
				t.Errorf("%q begins with %q but is not below %q", s, p, end)
			}
		}
		for _, s := range []string{end, end + "a", end + "\U0010FFFF"} {
			if !strings.HasPrefix(s, p) && s >= p && s < end {
				t.Errorf("%q does not begin with %q but is below %q", s, p, end)
			}
		}
	}
}

func TestStartAfter(t *testing.T) {
	for _, c := range []struct {
		key, prefix, delim string
		want               Cursor
	}{
		{"ns/a/", "", "/", Cursor{"ns/a/", false}}, // two delimiters after the prefix: a key
		{"ns/", "", "/", Cursor{"ns/", true}},
		{"ns/a/", "ns/", "/", Cursor{"ns/a/", true}},
		{"ns/a/x", "ns/", "/", Cursor{"ns/a/x", false}},
		{"ns/a/", "ns/", "", Cursor{"ns/a/", false}},
		{"ns/a/", "other/", "/", Cursor{"ns/a/", false}},
		{"", "", "/", Cursor{}},
	} {
		if got := StartAfter(c.key, c.prefix, c.delim); got != c.want {
			t.Errorf("StartAfter(%q, %q, %q) = %+v, want %+v", c.key, c.prefix, c.delim, got, c.want)
		}
	}
}

func TestETag(t *testing.T) {
	sha := strings.Repeat("0123456789abcdef", 4)
	if got := ETag(sha); got != `"0123456789abcdef0123456789abcdef"` {
		t.Errorf("ETag = %s", got)
	}
}

// A listing from what Postgres text cannot hold (not UTF-8, or NUL) is refused, naming
// the parameter.
func TestListUnstorable(t *testing.T) {
	t.Parallel()
	b := newBucket(t, false)
	for _, c := range []struct {
		q     Query
		field string
	}{
		{Query{Prefix: "ns/\x00", Max: 5}, "prefix"},
		{Query{Prefix: "\xc3", Max: 5}, "prefix"},
		{Query{After: Cursor{Key: "a\x00"}, Max: 5}, "start-after"},
	} {
		c.q.Tables = b.all()
		_, err := List(context.Background(), b.db, c.q)
		var ae *apierr.Error
		if !errors.As(err, &ae) || ae.Kind != apierr.InvalidArgument || ae.Field != c.field {
			t.Errorf("%+v: %v, want InvalidArgument of %s", c.q, err, c.field)
		}
	}
}
