package files

import (
	"regexp"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/layout"
)

func TestValidKey(t *testing.T) {
	good := []string{
		layout.DataKey("default", "orders", 3, 0, 100, strings.Repeat("ab", 32)),
		layout.MetadataKey("default", "orders", "00002-3f2b1c4e-0000-4000-8000-000000000000.metadata.json"),
		"a", "ns/t/x.avro", "with space/and-ünicode",
	}
	for _, k := range good {
		if err := ValidKey(k); err != nil {
			t.Errorf("ValidKey(%q) = %v", k, err)
		}
	}
	bad := []string{"", "/abs", "a//b", "a/", "../etc/passwd", "a/../../b", "a/./b", ".", "..", "a\\b", "a\x00b", "a\nb",
		"\xff\xfe", strings.Repeat("k", MaxKeyLen+1)}
	for _, k := range bad {
		err := ValidKey(k)
		if apierr.Classify(err) != apierr.InvalidArgument {
			t.Errorf("ValidKey(%q) = %v, want InvalidArgument", k, err)
		}
	}
}

func TestParseAndResolveRange(t *testing.T) {
	const size = 1000
	for _, c := range []struct {
		h       string
		off, n  int64
		badSize bool // parses, but not satisfiable for size
	}{
		{"bytes=0-0", 0, 1, false},
		{"bytes=0-999", 0, 1000, false},
		{"bytes=10-19", 10, 10, false},
		{"bytes=990-5000", 990, 10, false},
		{"bytes=500-", 500, 500, false},
		{"bytes=-1", 999, 1, false},
		{"bytes=-2000", 0, 1000, false},
		{"bytes= 1-2", 1, 2, false},
		{"Bytes=1-2", 1, 2, false},  // units are case-insensitive
		{"bytes=1-2,", 1, 2, false}, // an empty list element is no range
		{"bytes=1-99999999999999999999", 1, 999, false},
		{"bytes=-99999999999999999999", 0, 1000, false},
		{"bytes=1000-", 0, 0, true},
		{"bytes=1000-1001", 0, 0, true},
		{"bytes=-0", 0, 0, true},
		{"bytes=99999999999999999999-", 0, 0, true},
	} {
		r := ParseRange(c.h)
		if r == nil {
			t.Errorf("ParseRange(%q) = nil, want a range", c.h)
			continue
		}
		off, n, err := r.Resolve(size)
		if c.badSize {
			e := apierr.S3(err, "R")
			if apierr.Classify(err) != apierr.OutOfRange || e.Code != "InvalidRange" || e.ContentRange != "bytes */1000" {
				t.Errorf("%q: resolved to %d+%d, %v (%+v); want InvalidRange with bytes */1000", c.h, off, n, err, e)
			}
			// The size survives the trip from the owner, as a gRPC status.
			if got := apierr.S3(apierr.GRPC(err), "R").ContentRange; got != "bytes */1000" {
				t.Errorf("%q from another node: Content-Range %q", c.h, got)
			}
			continue
		}
		if err != nil || off != c.off || n != c.n {
			t.Errorf("%q: %d+%d %v, want %d+%d", c.h, off, n, err, c.off, c.n)
		}
		// The range survives the trip to the owner.
		if r2 := rangeFromProto(rangeToProto(r)); r2.String() != r.String() {
			t.Errorf("%q: %s after the proto round trip", c.h, r2)
		}
	}
	// What is not one byte range is no range: the whole file, as RFC 9110 has it.
	for _, h := range []string{"", "bytes=5-1", "bytes=0-1,3-4", "bytes=0-1, 5-6", "items=0-1", "bytes=", "bytes=-", "bytes=a-b",
		"bytes=1", "bytes=--1", "bytes=+1-2", "bytes 0-1", "bytes=1-2-3", "bytes=0x1-2"} {
		if r := ParseRange(h); r != nil {
			t.Errorf("ParseRange(%q) = %s, want nil (the whole file)", h, r)
		}
	}
	var whole *Range
	if off, n, err := whole.Resolve(0); off != 0 || n != 0 || err != nil {
		t.Errorf("whole empty file: %d %d %v", off, n, err)
	}
	if _, _, err := (&Range{IsSuffix: true, Suffix: 5}).Resolve(0); apierr.S3(err, "R").ContentRange != "bytes */0" {
		t.Errorf("a suffix of an empty file: %v", err)
	}
}

// A data file's owner is decided by its table, partition and offsets, not its checksum:
// the owner of a tail span is known before its bytes are.
func TestOwnerKey(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	data := layout.DataKey("default", "orders", 3, 10, 200, sha)
	span := TailIdentity("default", "orders", 3, 10, 200)
	if OwnerKey(data) != span || OwnerKey(span) != span {
		t.Errorf("OwnerKey(%s) = %s, OwnerKey(%s) = %s; want both %s", data, OwnerKey(data), span, OwnerKey(span), span)
	}
	if other := layout.DataKey("default", "orders", 3, 10, 200, strings.Repeat("cd", 32)); OwnerKey(other) != span {
		t.Errorf("another checksum of the same span: %s", OwnerKey(other))
	}
	for _, k := range []string{
		layout.MetadataKey("default", "orders", "00002-3f2b1c4e-0000-4000-8000-000000000000.metadata.json"),
		"default/orders/data/_kafka_partition=0/bench.parquet",
	} {
		if OwnerKey(k) != k {
			t.Errorf("OwnerKey(%s) = %s, want the key itself", k, OwnerKey(k))
		}
	}
	if ValidKey(span) != nil {
		t.Errorf("a span's identity is not a valid key: %v", ValidKey(span))
	}
}

// OwnerKey parses by hand what this regexp says a data file's key is; every near miss
// (each part of a data key broken in turn) is still the key itself.
func TestOwnerKeyMatchesItsGrammar(t *testing.T) {
	re := regexp.MustCompile(`^(.+/data/_kafka_partition=\d+/\d{20}-\d{20})-[0-9a-f]+\.parquet$`)
	good := layout.DataKey("default", "orders", 3, 10, 200, strings.Repeat("ab", 32))
	keys := []string{
		good,
		layout.DataKey("a", "b", 0, 0, 0, "0"),
		"x/data/_kafka_partition=7/00000000000000000001-00000000000000000002-f.parquet",
		"a/b/c/data/_kafka_partition=12/00000000000000000001-00000000000000000002-0a.parquet",
		"/data/_kafka_partition=7/00000000000000000001-00000000000000000002-f.parquet",
		"x\n/data/_kafka_partition=7/00000000000000000001-00000000000000000002-f.parquet",
		"x/data/_kafka_partition=/00000000000000000001-00000000000000000002-f.parquet",
		"x/data/_kafka_partition=a/00000000000000000001-00000000000000000002-f.parquet",
		"x/data/_kafka_partition=1/0000000000000000001-00000000000000000002-f.parquet",
		"x/data/_kafka_partition=1/00000000000000000001-000000000000000000020-f.parquet",
		"x/data/_kafka_partition=1/00000000000000000001_00000000000000000002-f.parquet",
		"x/data/_kafka_partition=1/00000000000000000001-00000000000000000002-F.parquet",
		"x/data/_kafka_partition=1/00000000000000000001-00000000000000000002-.parquet",
		"x/data/_kafka_partition=1/00000000000000000001-00000000000000000002.parquet",
		"x/data/_kafka_partition=1/00000000000000000001-00000000000000000002-f.parquetx",
		"x/dat/_kafka_partition=1/00000000000000000001-00000000000000000002-f.parquet",
		"x/data/kafka_partition=1/00000000000000000001-00000000000000000002-f.parquet",
		"x/data/_kafka_partition=1/x/00000000000000000001-00000000000000000002-f.parquet",
		"data/_kafka_partition=1/00000000000000000001-00000000000000000002-f.parquet",
		"x/data/_kafka_partition=1/00000000000000000001-00000000000000000002-f-f.parquet",
		"default/orders/data/_kafka_partition=0/bench.parquet",
		".parquet", "-.parquet", "", "a/b/metadata/v1.metadata.json",
	}
	// Every byte of a good key replaced in turn, and every prefix and suffix of it.
	for i := range len(good) {
		for _, c := range []byte{'0', 'f', 'g', '-', '/', '\n'} {
			keys = append(keys, good[:i]+string(c)+good[i+1:])
		}
		keys = append(keys, good[:i], good[i:])
	}
	for _, k := range keys {
		want := k
		if m := re.FindStringSubmatch(k); m != nil {
			want = m[1]
		}
		if got := OwnerKey(k); got != want {
			t.Errorf("OwnerKey(%q) = %q, want %q", k, got, want)
		}
	}
}

func BenchmarkOwnerKey(b *testing.B) {
	key := layout.DataKey("default", "orders", 3, 10, 200, strings.Repeat("ab", 32))
	for b.Loop() {
		OwnerKey(key)
	}
}
