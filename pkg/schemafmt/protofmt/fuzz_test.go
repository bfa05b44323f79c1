package protofmt

import (
	"math"

	"github.com/apache/iceberg-go"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/minkhq/mink/pkg/rowcodec"
	"github.com/minkhq/mink/pkg/schemafmt"
)

// FuzzDecode checks, on any input, that decoding does not panic, that it is
// deterministic (and independent of the memory it reuses), and that whatever dynamicpb
// parses reads as the oracle says.
func FuzzDecode(f *testing.F) {
	all := compile(f, allProto, "")
	known := compile(f, allProto, "acme.test.v1.Known")
	// proto2 without enums: dynamicpb drops a closed enum's unknown numbers, which
	// Decode reads as their text.
	p2 := compile(f, strings.NewReplacer("optional Kind kind = 3;", "", "enum Kind { A = 1; B = 2; }", "").Replace(proto2Schema), "")
	for _, seed := range fuzzSeeds(f, all, known) {
		f.Add(seed)
	}
	decAll, tAll := bind(f, all)
	decKnown, tKnown := bind(f, known)
	decP2, tP2 := bind(f, p2)
	// A big value to decode into first, so that reused memory is exercised.
	bigAll := fuzzSeeds(f, all, known)[0]

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, c := range []struct {
			s      *Schema
			dec    schemafmt.Decoder
			target iceberg.Type
		}{{all, decAll, tAll}, {known, decKnown, tKnown}, {p2, decP2, tP2}} {
			var fresh rowcodec.Value
			r1 := c.dec.Decode(data, &fresh)
			var out1 string
			if r1 == "" {
				out1 = render(fresh, c.target)
			}
			var reused rowcodec.Value
			c.dec.Decode(bigAll, &reused)
			r2 := c.dec.Decode(data, &reused)
			if r1 != r2 {
				t.Fatalf("reasons differ: %q, %q", r1, r2)
			}
			if r1 == "" {
				if out2 := render(reused, c.target); out1 != out2 {
					t.Fatalf("reused memory changes the value:\n%s\n%s", out1, out2)
				}
			}
			if strings.HasPrefix(r1, "value out of range") || strings.HasPrefix(r1, "JSON value nested too deeply") || r1 == reasonTooDeep {
				continue // dynamicpb has no such limits
			}
			if c.s == p2 && strings.HasPrefix(r1, "invalid UTF-8") {
				continue // proto2 allows it, Iceberg strings do not
			}
			m := newMsg(c.s)
			err, panicked := unmarshal(data, m)
			if panicked {
				// dynamicpb v1.36 panics on a map entry whose key field comes again
				// with another wire type; Decode skips it, as generated code does.
				continue
			}
			if (err == nil) != (r1 == "") {
				t.Fatalf("dynamicpb: %v; Decode: %q", err, r1)
			}
			if err == nil {
				if want := ref(m); out1 != want {
					t.Fatalf("\n got %s\n ref %s", out1, want)
				}
			}
		}
	})
}

func fuzzSeeds(t testing.TB, all, known *Schema) [][]byte {
	m := newMsg(all)
	set(m, "b", true)
	set(m, "i32", int32(-1))
	set(m, "s64", int64(math.MinInt64))
	set(m, "u64", uint64(math.MaxUint64))
	set(m, "fl", float32(math.NaN()))
	set(m, "s", "héllo")
	set(m, "color", protoreflect.EnumNumber(9))
	set(m, "inner.deep.flag", true)
	set(m, "c_msg.name", "c")
	set(m, "opt", int32(0))
	for i := range 3 {
		in := sub(m, "inners")
		set(in, "n", int32(i))
		appendList(m, "inners", in)
		appendList(m, "nums", int32(i-1))
		appendList(m, "strs", "s")
		setMap(m, "by_name", string(rune('a'+i)), int64(i))
		setMap(m, "by_int", int32(-i), "v")
		setMap(m, "by_u64", uint64(i), int64(-i))
	}
	setMap(m, "by_bool", true, sub(m, "by_bool"))

	k := newMsg(known)
	set(k, "ts.seconds", int64(-1))
	set(k, "ts.nanos", int32(5))
	set(k, "dur.nanos", int32(-5))
	set(k, "w_uint64.value", uint64(3))
	set(k, "w_string.value", "w")
	j := jsonBuilder{known}
	set(k, "st", j.object(map[string]any{"a": []any{1.0, "x", nil, true}, "b": map[string]any{"c": math.Inf(1)}}))
	set(k, "val", j.value(2.5))
	set(k, "lv", j.list([]any{map[string]any{}}))
	setMap(k, "vals", "k", j.value("v"))
	anyMsg := sub(k, "any")
	set(anyMsg, "type_url", "t/x")
	set(anyMsg, "value", []byte{1})
	set(k, "any", anyMsg)
	appendList(k, "tss", sub(k, "tss"))

	a, b := marshal(t, m), marshal(t, k)
	// proto2 groups: Extra{x: 3, tags: ["t"]}, Item{k: "v"}, id 7.
	g := []byte{0x08, 0x07, 0x2b, 0x08, 0x03, 0x12, 0x01, 't', 0x2c, 0x33, 0x0a, 0x01, 'v', 0x34}
	return [][]byte{a, b, cat(a, a), {}, g}
}

// unmarshal is dynamicpb's parse, reporting whether it panicked.
func unmarshal(data []byte, m proto.Message) (err error, panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	return proto.UnmarshalOptions{RecursionLimit: math.MaxInt32, AllowPartial: true}.Unmarshal(data, m), false
}
