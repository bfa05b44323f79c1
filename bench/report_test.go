package bench

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The harness itself runs only through bench/cmd/minkbench; these check its arithmetic
// and the rewrite of docs/benchmarks.md, and start nothing.

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	ds := ms(5, 1, 4, 2, 3, 10, 9, 8, 7, 6)
	for _, c := range []struct {
		p    float64
		want int
	}{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := Percentile(ds, c.p); got != time.Duration(c.want)*time.Millisecond {
			t.Errorf("p%v = %v, want %dms", c.p, got, c.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("percentile of nothing is not 0")
	}
	if ds[0] != 5*time.Millisecond {
		t.Error("Percentile sorted its input")
	}
}

func TestRows(t *testing.T) {
	if r := Speed("x", 40, 100, "MB/s"); r.Ratio != "0.40×" || !r.Low {
		t.Errorf("speed row %+v", r)
	}
	if r := Latency("x", 2*time.Millisecond, time.Millisecond); r.Ratio != "0.50×" || r.Low {
		t.Errorf("latency row %+v", r)
	}
	if r := Latency("x", 2*time.Second, 300*time.Microsecond); r.Ratio != "0.0001×" {
		t.Errorf("tiny ratio %q", r.Ratio)
	}
	if r := Bound("x", 3*time.Second, 4*time.Second); r.Ratio != "0.75 of bound" {
		t.Errorf("bound row %+v", r)
	}
}

func TestPkgOf(t *testing.T) {
	for sym, want := range map[string]string{
		"github.com/klauspost/compress/zstd.(*blockEnc).encode": "github.com/klauspost/compress/zstd",
		"runtime.memmove":                                        "runtime",
		"internal/runtime/syscall/linux.Syscall6":                "internal/runtime/syscall/linux",
		"crypto/internal/fips140/sha256.blockSHANI.abi0":         "crypto/internal/fips140/sha256",
		"github.com/minkhq/mink/pkg/parquetbuild.(*Builder).Add": "github.com/minkhq/mink/pkg/parquetbuild",
	} {
		if got := pkgOf(sym); got != want {
			t.Errorf("pkgOf(%q) = %q, want %q", sym, got, want)
		}
	}
	for sym, want := range map[string]string{
		"runtime.scanobject":             "runtime: GC and allocation",
		"runtime.mallocgc":               "runtime: GC and allocation",
		"runtime.memmove":                "runtime: memmove, memclr (copying, zeroing)",
		"runtime.futex":                  "runtime: scheduler, timers, syscalls, other",
		"internal/runtime/gc/scan.scanX": "runtime: GC and allocation",
		"encoding/json.appendCompact":    "encoding/json",
	} {
		if got := bucketOf(sym); got != want {
			t.Errorf("bucketOf(%q) = %q, want %q", sym, got, want)
		}
	}
}

func TestSizes(t *testing.T) {
	s := Sizes{{1, 2, 3, 4}, {10, 20}}
	if got := s.Bytes(0, 1, 3); got != 5 {
		t.Errorf("bytes of [1, 3) = %d", got)
	}
	if n, b := s.Total(); n != 6 || b != 40 {
		t.Errorf("total = %d records, %d bytes", n, b)
	}
}

// WriteDoc replaces only what lies between the markers.
func TestWriteDocKeepsTheAnalysis(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	r := &Report{Started: time.Unix(0, 0), Items: []*Item{{N: 1, Title: "Indexing", Rows: []Row{Speed("one partition", 50, 100, "MB/s")}}}}
	if err := r.WriteDoc(path); err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile(path)
	edited := strings.Replace(string(doc), "# Benchmarks\n", "# Benchmarks\n\nIntro by hand.\n", 1) + "\n## Analysis\n\nBy hand too.\n"
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Items[0].Rows[0] = Speed("one partition", 90, 100, "MB/s")
	if err := r.WriteDoc(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	got := string(b)
	for _, want := range []string{"Intro by hand.", "## Analysis\n\nBy hand too.", "0.90×", BeginMarker, EndMarker} {
		if !strings.Contains(got, want) {
			t.Errorf("rewritten doc lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "50.0 MB/s") || strings.Count(got, BeginMarker) != 1 {
		t.Errorf("old results kept or markers doubled:\n%s", got)
	}
}

// A run of some items keeps the others' rows and sections, and says which it replaced.
func TestWriteDocMergesARunOfSomeItems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	full := &Report{Started: time.Unix(0, 0), Command: "minkbench", LoadStart: "1 1 1", LoadEnd: "1 1 1", Items: []*Item{
		{N: 1, Title: "Indexing", Rows: []Row{Speed("one partition", 50, 100, "MB/s")}, Notes: []string{"full run note"}},
		{N: 2, Title: "Builds", Rows: []Row{Speed("builds", 70, 100, "MB/s")}},
		{N: 9, Title: "Avro", Rows: []Row{Speed("avro", 60, 100, "rec/s")}},
	}}
	if err := full.WriteDoc(path); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	before := read()
	some := func(v float64) *Report {
		return &Report{Started: time.Unix(3600, 0), Command: "minkbench -items 9", LoadStart: "2 2 2", LoadEnd: "3 3 3", Commit: "abc",
			Items: []*Item{{N: 9, Title: "Avro", Rows: []Row{Speed("avro", v, 100, "rec/s")}, Notes: []string{"partial note"}}}}
	}
	for _, v := range []float64{90, 95} { // twice: the second run's note replaces the first's
		if err := some(v).WriteDoc(path); err != nil {
			t.Fatal(err)
		}
	}
	got := read()
	for _, want := range []string{"| 1 | one partition | 50.0 MB/s | 100 MB/s | 0.50× |", "| 2 | builds |", "full run note",
		"| 9 | avro | 95.0 rec/s | 100 rec/s | 0.95× |", "partial note", "Run of 1970-01-01 00:00 UTC",
		"Item 9 was run on its own at 1970-01-01 01:00 UTC", "load average at start 2 2 2, at end 3 3 3; commit abc"} {
		if !strings.Contains(got, want) {
			t.Errorf("merged doc lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "0.60×") || strings.Contains(got, "0.90×") || strings.Count(got, "was run on its own") != 1 {
		t.Errorf("old results of item 9, or two notes, kept:\n%s", got)
	}
	// Items in number order, each section once.
	if a, b, c := strings.Index(got, "### 1. Indexing"), strings.Index(got, "### 2. Builds"), strings.Index(got, "### 9. Avro"); !(a < b && b < c) ||
		strings.Count(got, "### 9. Avro") != 1 {
		t.Errorf("sections out of order:\n%s", got)
	}
	// Everything of items 1 and 2 is as the full run wrote it.
	g0, ok0 := parseGenerated(before[strings.Index(before, BeginMarker)+len(BeginMarker)+2:])
	g1, ok1 := parseGenerated(got[strings.Index(got, BeginMarker)+len(BeginMarker)+2:])
	if !ok0 || !ok1 {
		t.Fatal("generated sections do not parse")
	}
	for _, n := range []int{1, 2} {
		if g0.rows[n] != g1.rows[n] || g0.sections[n] != g1.sections[n] {
			t.Errorf("item %d changed:\n%q\n%q", n, g0.sections[n], g1.sections[n])
		}
	}
	// Replace drops what this run did not measure.
	r := some(99)
	r.Replace = true
	if err := r.WriteDoc(path); err != nil {
		t.Fatal(err)
	}
	if got := read(); strings.Contains(got, "### 1. Indexing") || strings.Contains(got, "was run on its own") {
		t.Errorf("replace kept other items:\n%s", got)
	}
}

// The generated section of docs/benchmarks.md takes apart and puts back together
// exactly, so a run of some items keeps the others' results unchanged.
func TestParseTheCommittedResults(t *testing.T) {
	b, err := os.ReadFile("../docs/benchmarks.md")
	if err != nil {
		t.Skip(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, BeginMarker), strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		t.Fatal("no markers")
	}
	text := strings.TrimPrefix(doc[i+len(BeginMarker):j], "\n\n")
	g, ok := parseGenerated(text)
	if !ok || g.sections[1] == "" || g.rows[1] == "" {
		t.Fatalf("does not parse: %v, %d sections", ok, len(g.sections))
	}
	var sb strings.Builder
	sb.WriteString(g.header + summaryHead)
	nums := slices.Sorted(maps.Keys(g.sections))
	for _, n := range nums {
		sb.WriteString(g.rows[n])
	}
	for _, n := range nums {
		sb.WriteString(g.sections[n])
	}
	if sb.String() != strings.TrimRight(text, "\n")+"\n" {
		t.Errorf("parsed and put back together, the results differ")
	}
}
