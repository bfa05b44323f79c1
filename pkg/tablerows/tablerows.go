// Package tablerows reads a table's rows as an Iceberg engine does (a table loaded from
// the REST catalog, its files read over S3 by iceberg-go) and renders each value the one
// way minkctl scan and the console show it: as text, or as JSON.
package tablerows

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"iter"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers the s3:// FileIO the tables' files are read through
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// CatalogOptions carry a bearer token (empty: none) and a TLS config (nil: the system's)
// to the REST catalog, and the TLS config's CA to iceberg-go's S3 reads, which build
// their S3 client on the AWS config the context carries, when there is one.
func CatalogOptions(ctx context.Context, token string, cfg *tls.Config) (context.Context, []rest.Option) {
	var opts []rest.Option
	if token != "" {
		opts = append(opts, rest.WithOAuthToken(token))
	}
	if cfg == nil {
		return ctx, opts
	}
	opts = append(opts, rest.WithTLSConfig(cfg))
	if cfg.RootCAs != nil {
		s3TLS := cfg.Clone()
		hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { t.TLSClientConfig = s3TLS })
		ctx = utils.WithAwsConfig(ctx, &aws.Config{HTTPClient: hc})
	}
	return ctx, opts
}

// Read emits up to limit rows (0: every row, as the files are planned) of tbl's columns,
// one call of emit per row with a cell per column. With a limit, a table with Kafka
// columns gives the newest rows by Kafka timestamp (newest) or the oldest, oldest first,
// ordered by _kafka_timestamp, _kafka_partition, _kafka_offset. The cells are valid
// during the call only (they may share Arrow's buffers): copy what is kept.
func Read(ctx context.Context, tbl *table.Table, columns []string, limit int64, newest bool, emit func([]any) error) (int64, error) {
	if kc, ok := kafkaColumnsOf(tbl.Schema()); ok && limit > 0 {
		return readOrdered(ctx, tbl, columns, kc, limit, newest, emit)
	}
	opts := []table.ScanOption{table.WithSelectedFields(columns...)}
	if limit > 0 {
		opts = append(opts, table.WithLimit(limit)) // stops reading files once enough rows are in
	}
	schema, recs, err := tbl.Scan(opts...).ToArrowRecords(ctx)
	if err != nil {
		return 0, fmt.Errorf("plan the scan: %w", err)
	}
	return Emit(schema, columns, recs, limit, emit)
}

// Emit calls emit with up to limit rows (0: all) of recs, the columns named in order,
// releasing each batch once its rows are emitted (the cells are valid during the call
// only). It returns the rows emitted.
func Emit(schema *arrow.Schema, columns []string, recs iter.Seq2[arrow.RecordBatch, error], limit int64, emit func([]any) error) (int64, error) {
	// Every batch has the scan's projected schema.
	idx, err := columnIndexes(schema, columns)
	if err != nil {
		return 0, err
	}
	var n int64
	vals := make([]any, len(columns))
	for rec, err := range recs {
		if err != nil {
			return n, err
		}
		for i := 0; i < int(rec.NumRows()) && (limit == 0 || n < limit); i++ {
			for j, k := range idx {
				vals[j] = CellOf(rec.Column(k), i)
			}
			if err := emit(vals); err != nil {
				rec.Release()
				return n, err
			}
			n++
		}
		rec.Release()
		if limit > 0 && n >= limit {
			break
		}
	}
	return n, nil
}

// kafkaColumns are the field ids and names Read orders rows by.
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

// readOrdered emits the limit newest rows (newest) or oldest, oldest first. It reads the
// files in the order of their timestamp bounds (newest last row first, or oldest first
// row first) and stops at the first file that cannot hold a row better than the worst
// kept: usually after a file or two, whatever the table's size.
func readOrdered(ctx context.Context, tbl *table.Table, columns []string, kc kafkaColumns, limit int64, newest bool, emit func([]any) error) (int64, error) {
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
					vals[j] = cloneCell(CellOf(rec.Column(idx[j]), i)) // kept past the batch's release
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
	for i, r := range kept {
		if err := emit(r.vals); err != nil {
			return int64(i), err
		}
	}
	return int64(len(kept)), nil
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
	case Object:
		out := make(Object, len(v))
		for i, f := range v {
			out[i] = Field{strings.Clone(f.Name), cloneCell(f.V)}
		}
		return out
	case Map:
		out := make(Map, len(v))
		for i, e := range v {
			out[i] = MapEntry{cloneCell(e.K), cloneCell(e.V)}
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

// A cell is one value taken out of Arrow, in a form every renderer shares: nil, bool,
// int64, uint64, float32, float64, Decimal, string (text, dates, times, timestamps,
// UUIDs), []byte (binary, fixed), []any (a list), Object (a struct) or Map (a map).
type (
	// Decimal is exact digits: a JSON number, never a float.
	Decimal string
	// Object is a struct's fields in order.
	Object []Field
	Field  struct {
		Name string
		V    any
	}
	// Map is a map's entries in their stored order; keys may be of any type.
	Map      []MapEntry
	MapEntry struct{ K, V any }
)

// CellOf is row i of a as a cell.
func CellOf(a arrow.Array, i int) any {
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
		return Decimal(a.Value(i).ToString(a.DataType().(*arrow.Decimal32Type).Scale))
	case *array.Decimal64:
		return Decimal(a.Value(i).ToString(a.DataType().(*arrow.Decimal64Type).Scale))
	case *array.Decimal128:
		return Decimal(a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale))
	case *array.Decimal256:
		return Decimal(a.Value(i).ToString(a.DataType().(*arrow.Decimal256Type).Scale))
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
		m := make(Map, 0, end-start)
		for k := start; k < end; k++ {
			m = append(m, MapEntry{CellOf(keys, int(k)), CellOf(items, int(k))})
		}
		return m
	case array.ListLike:
		vals := a.ListValues()
		start, end := a.ValueOffsets(i)
		list := make([]any, 0, end-start)
		for k := start; k < end; k++ {
			list = append(list, CellOf(vals, int(k)))
		}
		return list
	case *array.Struct:
		typ := a.DataType().(*arrow.StructType)
		obj := make(Object, a.NumField())
		for k := range obj {
			obj[k] = Field{Name: typ.Field(k).Name, V: CellOf(a.Field(k), i)}
		}
		return obj
	case *array.Dictionary:
		return CellOf(a.Dictionary(), a.GetValueIndex(i))
	}
	return a.ValueStr(i) // a type Iceberg does not produce: Arrow's own rendering
}

// Text renders a cell as text: NULL for null, text without quotes, binary that is not
// printable text as 0x and hex, lists in [], structs and maps in {}.
func Text(v any) string {
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
	case Decimal:
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
			parts[i] = Text(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case Object:
		parts := make([]string, len(v))
		for i, f := range v {
			parts[i] = printable(f.Name) + ": " + Text(f.V)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case Map:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = Text(e.K) + ": " + Text(e.V)
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

// AppendJSONRow appends one JSON Object, keys in column order, and a newline.
func AppendJSONRow(b []byte, columns []string, vals []any) []byte {
	b = append(b, '{')
	for i, c := range columns {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, c)
		b = append(b, ':')
		b = AppendJSON(b, vals[i])
	}
	return append(b, '}', '\n')
}

// AppendJSON renders a cell as JSON: decimals and integers as exact numbers, binary as
// base64 (as encoding/json does), non-finite floats as strings (JSON has no NaN), a map
// as an Object when its keys are scalars (keys as text, as Protobuf's JSON mapping
// does) and otherwise as a list of {"key":...,"value":...} entries.
func AppendJSON(b []byte, v any) []byte {
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
			return AppendJSONString(b, strconv.FormatFloat(f, 'g', -1, 32))
		}
		return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return AppendJSONString(b, strconv.FormatFloat(v, 'g', -1, 64))
		}
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	case Decimal:
		return append(b, v...)
	case string:
		return AppendJSONString(b, v)
	case []byte:
		return AppendJSONString(b, base64.StdEncoding.EncodeToString(v))
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSON(b, e)
		}
		return append(b, ']')
	case Object:
		b = append(b, '{')
		for i, f := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, f.Name)
			b = append(b, ':')
			b = AppendJSON(b, f.V)
		}
		return append(b, '}')
	case Map:
		if !scalarKeys(v) {
			b = append(b, '[')
			for i, e := range v {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"key":`...)
				b = AppendJSON(b, e.K)
				b = append(b, `,"value":`...)
				b = AppendJSON(b, e.V)
				b = append(b, '}')
			}
			return append(b, ']')
		}
		b = append(b, '{')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONKey(b, e.K)
			b = append(b, ':')
			b = AppendJSON(b, e.V)
		}
		return append(b, '}')
	}
	return AppendJSONString(b, fmt.Sprint(v))
}

// scalarKeys reports whether every key of m can be a JSON Object key, whole: text,
// numbers and booleans (binary keys are base64 text, as binary values are).
func scalarKeys(m Map) bool {
	for _, e := range m {
		switch e.K.(type) {
		case string, int64, uint64, bool, Decimal, float32, float64, []byte:
		default:
			return false
		}
	}
	return true
}

// appendJSONKey writes a scalar map key as a JSON Object key: its JSON text, quoted
// unless it is text already.
func appendJSONKey(b []byte, k any) []byte {
	switch k := k.(type) {
	case string:
		return AppendJSONString(b, k)
	case []byte:
		return AppendJSONString(b, base64.StdEncoding.EncodeToString(k))
	}
	text := AppendJSON(nil, k)
	if len(text) > 0 && text[0] == '"' { // a NaN or an infinity, quoted already
		return append(b, text...)
	}
	return AppendJSONString(b, string(text))
}

// AppendJSONString quotes s as JSON; unlike encoding/json it leaves <, > and & alone, so
// URLs and page paths read as they are.
func AppendJSONString(b []byte, s string) []byte {
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
