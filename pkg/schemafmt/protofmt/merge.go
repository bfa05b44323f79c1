package protofmt

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Protobuf merges the occurrences of a singular message field: a message written twice
// (as when two serialized messages are concatenated) reads as the merge of both. The
// fast path does not merge; when it meets a second occurrence it gives up (errDup), and
// the message is first rewritten here into one where each singular message field occurs
// once, its content the concatenation of its occurrences' (which is what merging means
// on the wire), at the place of its last occurrence (so that oneofs resolve as before).
// This is done on the wire, with the descriptors, not with dynamicpb, so that the result
// is Mink's own and does not depend on a library version.

// mergeMsg is what merging needs to know of a message type.
type mergeMsg struct {
	fields map[protowire.Number]mergeField
	oneofs [][]protowire.Number // the members of each (non-synthetic) oneof
}

// mergeField is a message-typed field or a oneof member.
type mergeField struct {
	wt       protowire.Type // the wire type of a value
	singular bool           // a singular message field, merged
	oneof    int            // 1 + the index of its oneof in mergeMsg.oneofs, or 0
	msg      *mergeMsg      // its message type (a map's entry type), or nil for a scalar
}

func newMergeMsg(md protoreflect.MessageDescriptor, cache map[protoreflect.FullName]*mergeMsg) *mergeMsg {
	if m := cache[md.FullName()]; m != nil {
		return m // Struct and Value contain each other
	}
	m := &mergeMsg{fields: map[protowire.Number]mergeField{}}
	cache[md.FullName()] = m
	oneofIndex := map[int]int{}
	fds := md.Fields()
	for i := 0; i < fds.Len(); i++ {
		fd := fds.Get(i)
		var f mergeField
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			k, ok := oneofIndex[od.Index()]
			if !ok {
				k = len(m.oneofs)
				oneofIndex[od.Index()] = k
				m.oneofs = append(m.oneofs, nil)
			}
			m.oneofs[k] = append(m.oneofs[k], fd.Number())
			f.oneof = k + 1
		}
		switch fd.Kind() {
		case protoreflect.MessageKind, protoreflect.GroupKind:
			f.wt = protowire.BytesType
			if fd.Kind() == protoreflect.GroupKind {
				f.wt = protowire.StartGroupType
			}
			f.singular = !fd.IsList() && !fd.IsMap()
			f.msg = newMergeMsg(fd.Message(), cache)
		default:
			if f.oneof == 0 {
				continue // only oneof members matter among scalars
			}
			f.wt = scalarWireType(fd.Kind())
		}
		m.fields[fd.Number()] = f
	}
	return m
}

func scalarWireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind:
		return protowire.BytesType
	}
	return protowire.VarintType
}

// maxMergeDepth bounds the nesting of messages rewritten. Only Struct, Value and
// ListValue nest without bound, and Decode refuses them beyond maxJSONDepth anyway.
const maxMergeDepth = 10000

const reasonTooDeep = "Protobuf message nested too deeply"

// mergePos is where a field occurs: its chunk and the offset of its tag there.
type mergePos struct{ chunk, off int }

// mergeRun is a run of occurrences of one singular message field that merge: those
// not separated by the setting of another member of its oneof.
type mergeRun struct {
	last   mergePos
	chunks [][]byte
}

// merge appends a message payload of type m, given as chunks whose concatenation it is,
// with its singular message fields merged, to out. It returns why not for malformed
// input, with bad the reason for malformed wire data. Each run of occurrences is written once, at its last occurrence: a run ended
// by another member of its oneof is still written, before that member, so that it is
// read (and checked) and then cleared as it would be. Nested payloads are written in
// place behind a fixed-size length, so that the work is linear in the input.
func merge(m *mergeMsg, chunks [][]byte, out []byte, depth int, bad string) ([]byte, string) {
	if depth > maxMergeDepth {
		return out, reasonTooDeep
	}
	// Pass 1: the runs of each singular message field.
	var runs []mergeRun
	var open map[protowire.Number]int // field → its open run
	var lastOf map[mergePos]int       // a run's last occurrence → the run
	for ci, b := range chunks {
		for off := 0; off < len(b); {
			num, wt, n, ok := tag(b[off:])
			if !ok {
				return out, bad
			}
			v, vn := fieldValue(num, wt, b[off+n:])
			if vn < 0 {
				return out, bad
			}
			if f, ok := m.fields[num]; ok && wt == f.wt {
				if f.oneof != 0 {
					// Setting a oneof member clears the others.
					for _, o := range m.oneofs[f.oneof-1] {
						if o != num {
							delete(open, o)
						}
					}
				}
				if f.singular {
					if open == nil {
						open, lastOf = map[protowire.Number]int{}, map[mergePos]int{}
					}
					i, ok := open[num]
					if ok {
						delete(lastOf, runs[i].last)
					} else {
						i = len(runs)
						runs = append(runs, mergeRun{})
						open[num] = i
					}
					pos := mergePos{ci, off}
					runs[i].last = pos
					runs[i].chunks = append(runs[i].chunks, v)
					lastOf[pos] = i
				}
			}
			off += n + vn
		}
	}
	// Pass 2: copy, rewriting message values and merging singular ones.
	var one [1][]byte
	for ci, b := range chunks {
		for off := 0; off < len(b); {
			num, wt, n, _ := tag(b[off:])
			v, vn := fieldValue(num, wt, b[off+n:])
			f, ok := m.fields[num]
			switch {
			case !ok || wt != f.wt || f.msg == nil:
				out = append(out, b[off:off+n+vn]...)
			case f.singular:
				if i, ok := lastOf[mergePos{ci, off}]; ok {
					var r string
					if out, r = appendMessage(f, num, runs[i].chunks, out, depth, bad); r != "" {
						return out, r
					}
				}
			default:
				one[0] = v
				var r string
				if out, r = appendMessage(f, num, one[:], out, depth, bad); r != "" {
					return out, r
				}
			}
			off += n + vn
		}
	}
	return out, ""
}

// lenSize is the size of the length written ahead of a nested payload: a varint padded
// to 5 bytes (parsers accept padded varints), enough for any payload under 32 GiB.
const lenSize = 5

// appendMessage appends field num holding the merge of chunks to out.
func appendMessage(f mergeField, num protowire.Number, chunks [][]byte, out []byte, depth int, bad string) ([]byte, string) {
	out = protowire.AppendTag(out, num, f.wt)
	if f.wt == protowire.StartGroupType {
		out, r := merge(f.msg, chunks, out, depth+1, bad)
		return protowire.AppendTag(out, num, protowire.EndGroupType), r
	}
	at := len(out)
	out = append(out, make([]byte, lenSize)...)
	out, r := merge(f.msg, chunks, out, depth+1, bad)
	n := uint64(len(out) - at - lenSize)
	for i := range lenSize - 1 {
		out[at+i] = byte(n>>(7*i)) | 0x80
	}
	out[at+lenSize-1] = byte(n >> (7 * (lenSize - 1)))
	return out, r
}

// fieldValue reads a field's value: v is a length-delimited or group value's content.
func fieldValue(num protowire.Number, wt protowire.Type, b []byte) (v []byte, n int) {
	switch wt {
	case protowire.BytesType:
		return protowire.ConsumeBytes(b)
	case protowire.StartGroupType:
		return protowire.ConsumeGroup(num, b)
	}
	return nil, protowire.ConsumeFieldValue(num, wt, b)
}
