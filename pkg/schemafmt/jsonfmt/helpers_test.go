package jsonfmt

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
)

// withIDs returns a copy of t with fresh field ids from 1, as a table would assign them.
func withIDs(t iceberg.Type) iceberg.Type {
	next := 0
	id := func() int { next++; return next }
	var walk func(t iceberg.Type) iceberg.Type
	walk = func(t iceberg.Type) iceberg.Type {
		switch t := t.(type) {
		case *iceberg.StructType:
			fl := make([]iceberg.NestedField, len(t.FieldList))
			for i, f := range t.FieldList {
				f.ID = id()
				fl[i] = f
			}
			for i := range fl {
				fl[i].Type = walk(fl[i].Type)
			}
			return &iceberg.StructType{FieldList: fl}
		case *iceberg.ListType:
			return &iceberg.ListType{ElementID: id(), Element: walk(t.Element), ElementRequired: t.ElementRequired}
		case *iceberg.MapType:
			k, v := id(), id()
			return &iceberg.MapType{KeyID: k, KeyType: walk(t.KeyType), ValueID: v, ValueType: walk(t.ValueType), ValueRequired: t.ValueRequired}
		}
		return t
	}
	return walk(t)
}

// typeString writes t compactly, checking the contract's optionality on the way: every
// field, element and value optional, every id 0.
func typeString(tb testing.TB, t iceberg.Type) string {
	tb.Helper()
	switch t := t.(type) {
	case *iceberg.StructType:
		parts := make([]string, len(t.FieldList))
		for i, f := range t.FieldList {
			if f.Required || f.ID != 0 {
				tb.Errorf("field %q: required %v, id %d", f.Name, f.Required, f.ID)
			}
			parts[i] = strconv.Quote(f.Name) + ": " + typeString(tb, f.Type)
		}
		return "struct<" + strings.Join(parts, ", ") + ">"
	case *iceberg.ListType:
		if t.ElementRequired || t.ElementID != 0 {
			tb.Errorf("list element: required %v, id %d", t.ElementRequired, t.ElementID)
		}
		return "list<" + typeString(tb, t.Element) + ">"
	case *iceberg.MapType:
		if t.ValueRequired || t.KeyID != 0 || t.ValueID != 0 {
			tb.Errorf("map: value required %v, ids %d %d", t.ValueRequired, t.KeyID, t.ValueID)
		}
		return "map<" + typeString(tb, t.KeyType) + ", " + typeString(tb, t.ValueType) + ">"
	}
	return t.String()
}

// render writes v, a value of type t, readably: the form tests compare.
func render(t iceberg.Type, v rowcodec.Value) string {
	if !v.Valid {
		return "null"
	}
	switch t := t.(type) {
	case *iceberg.StructType:
		if len(v.Elems) != len(t.FieldList) {
			return fmt.Sprintf("BAD STRUCT: %d values for %d fields", len(v.Elems), len(t.FieldList))
		}
		parts := make([]string, len(v.Elems))
		for i, f := range t.FieldList {
			parts[i] = f.Name + ": " + render(f.Type, v.Elems[i])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *iceberg.ListType:
		parts := make([]string, len(v.Elems))
		for i, e := range v.Elems {
			parts[i] = render(t.Element, e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *iceberg.MapType:
		parts := make([]string, len(v.Elems))
		for i, e := range v.Elems {
			if !e.Valid || len(e.Elems) != 2 || !e.Elems[0].Valid {
				return "BAD MAP ENTRY"
			}
			parts[i] = render(t.KeyType, e.Elems[0]) + ": " + render(t.ValueType, e.Elems[1])
		}
		return "map{" + strings.Join(parts, ", ") + "}"
	case iceberg.Int64Type:
		return strconv.FormatInt(v.Int, 10)
	case iceberg.Float64Type:
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case iceberg.BooleanType:
		return strconv.FormatBool(v.Int == 1)
	case iceberg.StringType:
		return strconv.Quote(string(v.Bytes))
	case iceberg.TimestampTzType:
		return time.UnixMicro(v.Int).UTC().Format("2006-01-02T15:04:05.999999Z07:00")
	case iceberg.DateType:
		return time.Unix(v.Int*86400, 0).UTC().Format("2006-01-02")
	case iceberg.TimeType:
		return time.UnixMicro(v.Int).UTC().Format("15:04:05.999999")
	case iceberg.UUIDType:
		if len(v.Bytes) != 16 {
			return "BAD UUID"
		}
		h := hex.EncodeToString(v.Bytes)
		return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	}
	return "UNKNOWN TYPE " + t.String()
}

func mustCompile(tb testing.TB, text string, refs ...schemafmt.Reference) schemafmt.Schema {
	tb.Helper()
	s, err := Compile(schemafmt.Source{Text: text, References: refs})
	if err != nil {
		tb.Fatalf("Compile: %v", err)
	}
	return s
}

// reader decodes payloads of one schema into a target, rendering each result.
type reader struct {
	tb     testing.TB
	target iceberg.Type
	dec    schemafmt.Decoder
	v      rowcodec.Value // reused across reads, as callers do
}

func newReader(tb testing.TB, s schemafmt.Schema, target iceberg.Type) *reader {
	tb.Helper()
	if target == nil {
		target = withIDs(s.Root())
	}
	d, err := s.Bind(target)
	if err != nil {
		tb.Fatalf("Bind: %v", err)
	}
	return &reader{tb: tb, target: target, dec: d}
}

// read returns the rendered value, or "error: " and the reason.
func (r *reader) read(payload string) string {
	if reason := r.dec.Decode([]byte(payload), &r.v); reason != "" {
		return "error: " + reason
	}
	return render(r.target, r.v)
}

// expect checks payload → want for each pair.
func (r *reader) expect(pairs ...string) {
	r.tb.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if got := r.read(pairs[i]); got != pairs[i+1] {
			r.tb.Errorf("%s\n got: %s\nwant: %s", pairs[i], got, pairs[i+1])
		}
	}
}
