package bench

import (
	"os"
	"path/filepath"
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
