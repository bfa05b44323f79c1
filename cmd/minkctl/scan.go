package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"math"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers the s3:// FileIO the tables' files are read through
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
)

type scanOpts struct {
	catalog string
	limit   int64
	columns string
	from    string
}

func scanFlags(fs *flag.FlagSet) any {
	o := &scanOpts{}
	fs.StringVar(&o.catalog, "catalog", "", "Iceberg REST catalog URL (default: a file server's, as the node at --addr reports it; https:// with --tls)")
	fs.Int64Var(&o.limit, "limit", 100, "most rows to print (0: every row, in the order the files are planned)")
	fs.StringVar(&o.columns, "columns", "", "comma-separated columns to print, in this order (default: every column)")
	fs.StringVar(&o.from, "from", "end", "which rows --limit keeps: end (the newest by Kafka timestamp, the default) or start (the oldest); either way printed oldest first, ordered by _kafka_timestamp, _kafka_partition, _kafka_offset")
	return o
}

// scan reads a table the way any Iceberg engine does: the REST catalog loads it (and
// says where its files are and how to reach Mink's S3 endpoint), then iceberg-go reads
// the data files over S3. It needs no admin API: it is the proof that the read path works.
func (c *cli) scan(ctx context.Context, args []string, f any) error {
	o := f.(*scanOpts)
	if o.limit < 0 {
		return usageError{fmt.Sprintf("--limit: want 0 (every row) or more, got %d", o.limit)}
	}
	if o.from != "start" && o.from != "end" {
		return usageError{fmt.Sprintf("--from: want start (the oldest rows) or end (the newest), got %q", o.from)}
	}
	ident, err := tableIdent(args[0])
	if err != nil {
		return err
	}
	columns, err := splitColumns(o.columns)
	if err != nil {
		return err
	}
	if o.catalog == "" {
		if o.catalog, err = c.findCatalog(ctx); err != nil {
			return err
		}
	}
	ctx, catOpts, err := c.catalogOptions(ctx)
	if err != nil {
		return err
	}
	cat, err := rest.NewCatalog(ctx, "mink", o.catalog, catOpts...)
	if err != nil {
		return c.catalogError(o.catalog, err)
	}
	name := strings.Join(ident, ".")
	tbl, err := cat.LoadTable(ctx, ident)
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable), errors.Is(err, catalog.ErrNoSuchNamespace):
		// The catalog's own words first: a table created seconds ago is registered but has
		// no metadata yet, and the catalog says so.
		return fmt.Errorf("table %s not loaded from catalog %s: %w (minkctl table list shows the registered tables)", name, o.catalog, err)
	case err != nil:
		return fmt.Errorf("load table %s: %w", name, c.catalogError(o.catalog, err))
	}
	var known []string
	for _, fld := range tbl.Schema().Fields() {
		known = append(known, fld.Name)
	}
	for _, col := range columns {
		if _, ok := tbl.Schema().FindFieldByName(col); !ok {
			return usageError{fmt.Sprintf("--columns: table %s has no column %q (it has: %s)", name, col, strings.Join(known, ", "))}
		}
	}
	if len(columns) == 0 {
		columns = known
	}
	var n int64
	if kc, ok := kafkaColumnsOf(tbl.Schema()); ok && o.limit > 0 {
		n, err = c.scanOrdered(ctx, tbl, columns, kc, o.limit, o.from == "end")
	} else {
		// Every row, or a table without Kafka columns: as the files are planned.
		opts := []table.ScanOption{table.WithSelectedFields(columns...)}
		if o.limit > 0 {
			opts = append(opts, table.WithLimit(o.limit)) // stops reading files once enough rows are in
		}
		schema, recs, err := tbl.Scan(opts...).ToArrowRecords(ctx)
		if err != nil {
			return fmt.Errorf("plan the scan of %s: %w", name, err)
		}
		n, err = printRows(c.stdout, c.output, schema, columns, recs, o.limit)
	}
	if err != nil {
		return fmt.Errorf("read %s (its data files come from the S3 endpoint the catalog names): %w", name, err)
	}
	if n == 0 && tbl.CurrentSnapshot() == nil {
		fmt.Fprintf(c.stderr, "minkctl: %s has no snapshot yet: the writer commits indexed ranges every mink.commit.interval\n", name)
	}
	return nil
}

// findCatalog asks the node at --addr where a catalog is: its own when it is a file
// server (on the host --addr reaches it by: behind a port mapping, as docker compose has
// it, the advertised name is the container's), else the first live file server's
// advertised one. Its scheme follows the --tls flags.
func (c *cli) findCatalog(ctx context.Context) (string, error) {
	const how = "scan finds the catalog through the node at --addr; or set --catalog or MINK_CATALOG"
	st, err := c.client.GetStatus(ctx, &adminv1.GetStatusRequest{Node: c.node})
	if err != nil {
		return "", fmt.Errorf("%s: %w", how, err)
	}
	addr := st.GetAddrs()["catalog"]
	if _, port, err := net.SplitHostPort(addr); err == nil && c.node == "" {
		if host, _, err := net.SplitHostPort(c.addr); err == nil {
			addr = net.JoinHostPort(host, port)
		}
	}
	if addr == "" {
		nodes, err := c.client.ListNodes(ctx, &adminv1.ListNodesRequest{Node: c.node})
		if err != nil {
			return "", fmt.Errorf("%s: %w", how, err)
		}
		ns := nodes.GetNodes()
		sort.Slice(ns, func(i, j int) bool { return ns[i].GetNodeId() < ns[j].GetNodeId() })
		for _, n := range ns {
			if a := n.GetAddrs()["catalog"]; a != "" && !n.GetDraining() {
				addr = a
				break
			}
		}
	}
	if addr == "" {
		return "", usageError{fmt.Sprintf("no file server is live in the cluster of %s, so there is no catalog to read through: start one, or set --catalog or MINK_CATALOG", c.addr)}
	}
	if c.tls || c.tlsCAFile != "" || c.tlsServerName != "" {
		return "https://" + addr, nil
	}
	return "http://" + addr, nil
}

// kafkaColumns are the field ids and names scan orders rows by.
type kafkaColumns struct{ timestamp int }

const (
	colTimestamp = "_kafka_timestamp"
	colPartition = "_kafka_partition"
	colOffset    = "_kafka_offset"
)

func kafkaColumnsOf(s *iceberg.Schema) (kafkaColumns, bool) {
	ts, ok1 := s.FindFieldByName(colTimestamp)
	_, ok2 := s.FindFieldByName(colPartition)
	_, ok3 := s.FindFieldByName(colOffset)
	return kafkaColumns{timestamp: ts.ID}, ok1 && ok2 && ok3
}

// rowKey orders rows as scan prints them: by Kafka timestamp, then partition and offset.
type rowKey struct {
	ts        int64
	partition int32
	offset    int64
}

func (a rowKey) less(b rowKey) bool {
	if a.ts != b.ts {
		return a.ts < b.ts
	}
	if a.partition != b.partition {
		return a.partition < b.partition
	}
	return a.offset < b.offset
}

type keptRow struct {
	key  rowKey
	vals []any
}

// scanOrdered prints the limit newest rows (newest) or oldest, oldest first. It reads the
// files in the order of their timestamp bounds (newest last row first, or oldest first
// row first) and stops at the first file that cannot hold a row better than the worst
// kept: usually after a file or two, whatever the table's size.
func (c *cli) scanOrdered(ctx context.Context, tbl *table.Table, columns []string, kc kafkaColumns, limit int64, newest bool) (int64, error) {
	selected := append([]string{}, columns...)
	for _, k := range []string{colTimestamp, colPartition, colOffset} {
		if !slices.Contains(selected, k) {
			selected = append(selected, k)
		}
	}
	sc := tbl.Scan(table.WithSelectedFields(selected...))
	tasks, err := sc.PlanFiles(ctx)
	if err != nil {
		return 0, fmt.Errorf("plan the scan: %w", err)
	}
	type bounded struct {
		task   table.FileScanTask
		lo, hi int64 // the file's timestamp bounds; unknown: math.MinInt64, math.MaxInt64
	}
	bs := make([]bounded, len(tasks))
	for i, t := range tasks {
		bs[i] = bounded{t, timestampBound(t.File.LowerBoundValues(), kc.timestamp, math.MinInt64),
			timestampBound(t.File.UpperBoundValues(), kc.timestamp, math.MaxInt64)}
	}
	if newest {
		sort.SliceStable(bs, func(i, j int) bool { return bs[i].hi > bs[j].hi })
	} else {
		sort.SliceStable(bs, func(i, j int) bool { return bs[i].lo < bs[j].lo })
	}
	// kept is sorted as printed, oldest first: its worst row is the first (newest) or
	// the last (oldest).
	var kept []keptRow
	worst := func() rowKey {
		if newest {
			return kept[0].key
		}
		return kept[len(kept)-1].key
	}
	for _, b := range bs {
		if int64(len(kept)) == limit {
			if w := worst().ts; newest && b.hi < w || !newest && b.lo > w {
				break // this file and every later one hold only worse rows
			}
		}
		schema, recs, err := sc.ReadTasks(ctx, []table.FileScanTask{b.task})
		if err != nil {
			return 0, err
		}
		idx, err := columnIndexes(schema, append(append([]string{}, columns...), colTimestamp, colPartition, colOffset))
		if err != nil {
			return 0, err
		}
		tsCol, partCol, offCol := idx[len(columns)], idx[len(columns)+1], idx[len(columns)+2]
		for rec, err := range recs {
			if err != nil {
				return 0, err
			}
			tsA, ok1 := rec.Column(tsCol).(*array.Timestamp)
			partA, ok2 := rec.Column(partCol).(*array.Int32)
			offA, ok3 := rec.Column(offCol).(*array.Int64)
			if !ok1 || !ok2 || !ok3 {
				rec.Release()
				return 0, fmt.Errorf("the Kafka columns are not timestamp, int and long")
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				k := rowKey{int64(tsA.Value(i)), partA.Value(i), offA.Value(i)}
				if int64(len(kept)) == limit && (newest && !worst().less(k) || !newest && !k.less(worst())) {
					continue
				}
				vals := make([]any, len(columns))
				for j := range columns {
					vals[j] = cloneCell(cellOf(rec.Column(idx[j]), i)) // kept past the batch's release
				}
				at := sort.Search(len(kept), func(j int) bool { return k.less(kept[j].key) })
				kept = slices.Insert(kept, at, keptRow{k, vals})
				if int64(len(kept)) > limit {
					if newest {
						kept = kept[1:]
					} else {
						kept = kept[:limit]
					}
				}
			}
			rec.Release()
		}
	}
	p := newRowPrinter(c.stdout, c.output, columns)
	for _, r := range kept {
		if err := p.row(r.vals); err != nil {
			return p.n, err
		}
	}
	return p.n, p.done()
}

// cloneCell copies what a cell shares with its Arrow buffers.
func cloneCell(v any) any {
	switch v := v.(type) {
	case string:
		return strings.Clone(v)
	case []byte:
		return bytes.Clone(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneCell(e)
		}
		return out
	case object:
		out := make(object, len(v))
		for i, f := range v {
			out[i] = field{strings.Clone(f.name), cloneCell(f.v)}
		}
		return out
	case mapCell:
		out := make(mapCell, len(v))
		for i, e := range v {
			out[i] = mapEntry{cloneCell(e.k), cloneCell(e.v)}
		}
		return out
	}
	return v
}

// timestampBound decodes a file's bound of a timestamp column (Iceberg's single-value
// form: microseconds as a little-endian long), or gives unknown when it has none.
func timestampBound(bounds map[int][]byte, field int, unknown int64) int64 {
	b, ok := bounds[field]
	if !ok || len(b) != 8 {
		return unknown
	}
	return int64(binary.LittleEndian.Uint64(b))
}

// catalogOptions carry --token and the --tls flags to the REST catalog, and the
// --tls-ca-file CA to iceberg-go's S3 reads (it builds its S3 client on the AWS config
// the context carries, when there is one). --tls-server-name is the node's, not theirs.
func (c *cli) catalogOptions(ctx context.Context) (context.Context, []rest.Option, error) {
	var opts []rest.Option
	if c.token != "" {
		opts = append(opts, rest.WithOAuthToken(c.token.Reveal()))
	}
	cfg, err := c.tlsConfig()
	if err != nil || cfg == nil {
		return ctx, opts, err
	}
	opts = append(opts, rest.WithTLSConfig(cfg))
	if cfg.RootCAs != nil {
		s3TLS := cfg.Clone()
		hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { t.TLSClientConfig = s3TLS })
		ctx = utils.WithAwsConfig(ctx, &aws.Config{HTTPClient: hc})
	}
	return ctx, opts, nil
}

// tableIdent reads "namespace.table" (Iceberg's multi-level "a.b.table" too) or "table",
// which is in namespace "default".
func tableIdent(s string) (table.Identifier, error) {
	parts := strings.Split(s, ".")
	for _, p := range parts {
		if p == "" {
			return nil, usageError{fmt.Sprintf("scan: %q is not NAMESPACE.TABLE", s)}
		}
	}
	if len(parts) == 1 {
		parts = append([]string{"default"}, parts...)
	}
	return parts, nil
}

func splitColumns(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var cols []string
	seen := map[string]bool{}
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if c == "" || seen[c] {
			return nil, usageError{fmt.Sprintf("--columns: empty or repeated column in %q", s)}
		}
		seen[c] = true
		cols = append(cols, c)
	}
	return cols, nil
}

// catalogError explains a catalog call that got no answer.
func (c *cli) catalogError(url string, err error) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne):
		return fmt.Errorf("catalog %s is unreachable (is a file server running? set --catalog or MINK_CATALOG): %w", url, err)
	case errors.Is(err, rest.ErrUnauthorized) && c.token == "":
		return fmt.Errorf("catalog %s checks credentials and none were given: set MINK_TOKEN or --token to a principal's secret: %w", url, err)
	case errors.Is(err, rest.ErrUnauthorized):
		return fmt.Errorf("catalog %s refused the token (%s): %w", url, c.sourceOf("token"), err)
	}
	return fmt.Errorf("catalog %s: %w", url, err)
}

// printRows prints up to limit rows (0: all) of recs, the columns named in order, as an
// aligned table ending in a row count, or as JSON lines (-o json). It returns the rows
// printed.
func printRows(w io.Writer, format string, schema *arrow.Schema, columns []string, recs iter.Seq2[arrow.RecordBatch, error], limit int64) (int64, error) {
	// Every batch has the scan's projected schema.
	idx, err := columnIndexes(schema, columns)
	if err != nil {
		return 0, err
	}
	p := newRowPrinter(w, format, columns)
	vals := make([]any, len(columns))
	for rec, err := range recs {
		if err != nil {
			p.flush() // what was read before the failure is still worth seeing
			return p.n, err
		}
		for i := 0; i < int(rec.NumRows()) && (limit == 0 || p.n < limit); i++ {
			for j, k := range idx {
				vals[j] = cellOf(rec.Column(k), i)
			}
			if err := p.row(vals); err != nil {
				rec.Release()
				return p.n, err
			}
		}
		rec.Release()
		if limit > 0 && p.n >= limit {
			break
		}
	}
	return p.n, p.done()
}

// rowPrinter prints rows of cells: aligned columns under a header, or JSON lines.
type rowPrinter struct {
	w       io.Writer
	tw      *tabwriter.Writer // nil: JSON lines
	columns []string
	buf     []byte
	n       int64 // rows printed
}

func newRowPrinter(w io.Writer, format string, columns []string) *rowPrinter {
	p := &rowPrinter{w: w, columns: columns}
	if format != "json" {
		p.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(p.tw, strings.Join(columns, "\t"))
	}
	return p
}

func (p *rowPrinter) row(vals []any) error {
	if p.tw != nil {
		for j, v := range vals {
			if j > 0 {
				p.tw.Write([]byte{'\t'})
			}
			io.WriteString(p.tw, cellText(v))
		}
		p.tw.Write([]byte{'\n'})
	} else {
		p.buf = appendJSONRow(p.buf[:0], p.columns, vals)
		if _, err := p.w.Write(p.buf); err != nil {
			return err
		}
	}
	p.n++
	return nil
}

func (p *rowPrinter) flush() {
	if p.tw != nil {
		p.tw.Flush()
	}
}

// done ends the output: the aligned table's row count.
func (p *rowPrinter) done() error {
	if p.tw == nil {
		return nil
	}
	if err := p.tw.Flush(); err != nil {
		return err
	}
	rows := "rows"
	if p.n == 1 {
		rows = "row"
	}
	_, err := fmt.Fprintf(p.w, "(%d %s)\n", p.n, rows)
	return err
}

func columnIndexes(s *arrow.Schema, columns []string) ([]int, error) {
	idx := make([]int, len(columns))
	for j, c := range columns {
		is := s.FieldIndices(c)
		if len(is) == 0 {
			return nil, fmt.Errorf("column %q is missing from the data read", c)
		}
		idx[j] = is[0]
	}
	return idx, nil
}

// A cell is one value taken out of Arrow, in a form both printers share: nil, bool,
// int64, uint64, float32, float64, decimalText, string (text, dates, times, timestamps,
// UUIDs), []byte (binary, fixed), []any (a list), object (a struct) or mapCell (a map).
type (
	decimalText string // exact digits: a JSON number, never a float
	object      []field
	field       struct {
		name string
		v    any
	}
	// mapCell is a map's entries in their stored order; keys may be of any type.
	mapCell  []mapEntry
	mapEntry struct{ k, v any }
)

func cellOf(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Uint8:
		return uint64(a.Value(i))
	case *array.Uint16:
		return uint64(a.Value(i))
	case *array.Uint32:
		return uint64(a.Value(i))
	case *array.Uint64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i) // printed with float32 precision: 0.1, not 0.10000000149011612
	case *array.Float64:
		return a.Value(i)
	case *array.Decimal32:
		return decimalText(a.Value(i).ToString(a.DataType().(*arrow.Decimal32Type).Scale))
	case *array.Decimal64:
		return decimalText(a.Value(i).ToString(a.DataType().(*arrow.Decimal64Type).Scale))
	case *array.Decimal128:
		return decimalText(a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale))
	case *array.Decimal256:
		return decimalText(a.Value(i).ToString(a.DataType().(*arrow.Decimal256Type).Scale))
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.StringView:
		return a.Value(i)
	case *array.Binary:
		return a.Value(i)
	case *array.LargeBinary:
		return a.Value(i)
	case *array.BinaryView:
		return a.Value(i)
	case *extensions.UUIDArray:
		return a.Value(i).String()
	case *array.FixedSizeBinary:
		return a.Value(i)
	case *array.Date32:
		return a.Value(i).ToTime().Format(time.DateOnly)
	case *array.Time64:
		unit := a.DataType().(*arrow.Time64Type).Unit
		return a.Value(i).ToTime(unit).Format("15:04:05.000000")
	case *array.Timestamp:
		typ := a.DataType().(*arrow.TimestampType)
		t := a.Value(i).ToTime(typ.Unit)
		layout := "2006-01-02T15:04:05.000000"
		if typ.Unit == arrow.Nanosecond {
			layout = "2006-01-02T15:04:05.000000000"
		}
		if typ.TimeZone != "" { // an instant (timestamptz): shown in UTC, marked so
			return t.UTC().Format(layout + "Z")
		}
		return t.Format(layout)
	case *array.Map:
		// Keys and values through the entries' struct array, whose own offset its fields
		// honour (Map.Keys and Map.Items ignore it).
		entries := a.ListValues().(*array.Struct)
		keys, items := entries.Field(0), entries.Field(1)
		start, end := a.ValueOffsets(i)
		m := make(mapCell, 0, end-start)
		for k := start; k < end; k++ {
			m = append(m, mapEntry{cellOf(keys, int(k)), cellOf(items, int(k))})
		}
		return m
	case array.ListLike:
		vals := a.ListValues()
		start, end := a.ValueOffsets(i)
		list := make([]any, 0, end-start)
		for k := start; k < end; k++ {
			list = append(list, cellOf(vals, int(k)))
		}
		return list
	case *array.Struct:
		typ := a.DataType().(*arrow.StructType)
		obj := make(object, a.NumField())
		for k := range obj {
			obj[k] = field{name: typ.Field(k).Name, v: cellOf(a.Field(k), i)}
		}
		return obj
	case *array.Dictionary:
		return cellOf(a.Dictionary(), a.GetValueIndex(i))
	}
	return a.ValueStr(i) // a type Iceberg does not produce: Arrow's own rendering
}

// maxCell is the widest a table cell gets; -o json prints values whole.
const maxCell = 64

// cellText renders a cell for the aligned table: NULL for null, text without quotes,
// and never a tab or newline, which would break the alignment.
func cellText(v any) string {
	s := plainText(v)
	if utf8.RuneCountInString(s) > maxCell {
		r := []rune(s)
		s = string(r[:maxCell-1]) + "…"
	}
	return s
}

func plainText(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case decimalText:
		return string(v)
	case string:
		return printable(v)
	case []byte:
		if utf8.Valid(v) && printable(string(v)) == string(v) {
			return string(v)
		}
		return "0x" + hex.EncodeToString(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = plainText(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case object:
		parts := make([]string, len(v))
		for i, f := range v {
			parts[i] = printable(f.name) + ": " + plainText(f.v)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case mapCell:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = plainText(e.k) + ": " + plainText(e.v)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// printable escapes control and other non-printing characters as Go would quote them.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// appendJSONRow appends one JSON object, keys in column order, and a newline.
func appendJSONRow(b []byte, columns []string, vals []any) []byte {
	b = append(b, '{')
	for i, c := range columns {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, c)
		b = append(b, ':')
		b = appendJSON(b, vals[i])
	}
	return append(b, '}', '\n')
}

// appendJSON renders a cell as JSON: decimals and integers as exact numbers, binary as
// base64 (as encoding/json does), non-finite floats as strings (JSON has no NaN), a map
// as an object when its keys are scalars (keys as text, as Protobuf's JSON mapping
// does) and otherwise as a list of {"key":...,"value":...} entries.
func appendJSON(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case float32:
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return appendJSONString(b, strconv.FormatFloat(f, 'g', -1, 32))
		}
		return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return appendJSONString(b, strconv.FormatFloat(v, 'g', -1, 64))
		}
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case decimalText:
		return append(b, v...)
	case string:
		return appendJSONString(b, v)
	case []byte:
		return appendJSONString(b, base64.StdEncoding.EncodeToString(v))
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	case object:
		b = append(b, '{')
		for i, f := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, f.name)
			b = append(b, ':')
			b = appendJSON(b, f.v)
		}
		return append(b, '}')
	case mapCell:
		if !scalarKeys(v) {
			b = append(b, '[')
			for i, e := range v {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"key":`...)
				b = appendJSON(b, e.k)
				b = append(b, `,"value":`...)
				b = appendJSON(b, e.v)
				b = append(b, '}')
			}
			return append(b, ']')
		}
		b = append(b, '{')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONKey(b, e.k)
			b = append(b, ':')
			b = appendJSON(b, e.v)
		}
		return append(b, '}')
	}
	return appendJSONString(b, fmt.Sprint(v))
}

// scalarKeys reports whether every key of m can be a JSON object key, whole: text,
// numbers and booleans (binary keys are base64 text, as binary values are).
func scalarKeys(m mapCell) bool {
	for _, e := range m {
		switch e.k.(type) {
		case string, int64, uint64, bool, decimalText, float32, float64, []byte:
		default:
			return false
		}
	}
	return true
}

// appendJSONKey writes a scalar map key as a JSON object key: its JSON text, quoted
// unless it is text already.
func appendJSONKey(b []byte, k any) []byte {
	switch k := k.(type) {
	case string:
		return appendJSONString(b, k)
	case []byte:
		return appendJSONString(b, base64.StdEncoding.EncodeToString(k))
	}
	text := appendJSON(nil, k)
	if len(text) > 0 && text[0] == '"' { // a NaN or an infinity, quoted already
		return append(b, text...)
	}
	return appendJSONString(b, string(text))
}

// appendJSONString quotes s as JSON; unlike encoding/json it leaves <, > and & alone, so
// URLs and page paths read as they are.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s { // invalid UTF-8 comes out as U+FFFD
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}
