package parquetbuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/record"
)

func TestSameRowsSameBytes(t *testing.T) {
	recs := makeRecords(4000, 1, 40)
	s := smallSettings()

	var first bytes.Buffer
	want := build(t, &first, testSpec, s, recs, 0)
	sum := sha256.Sum256(first.Bytes())
	if want.SHA256 != hex.EncodeToString(sum[:]) || want.Size != int64(first.Len()) {
		t.Fatalf("stats say %d bytes %s, file is %d bytes %x", want.Size, want.SHA256, first.Len(), sum)
	}
	if want.RowCount != int64(len(recs)) || len(want.SplitOffsets) != 4 {
		t.Fatalf("rows %d, row groups %d", want.RowCount, len(want.SplitOffsets))
	}

	// Again; into io.Discard (measuring); and with every chunking parquet-go may see.
	// Only the rows and settings may decide the bytes, not how we feed the writer.
	for _, chunk := range []int{writeChunkRows, 64, 128, s.RowGroupRows, 1 << 20} {
		var again bytes.Buffer
		got := build(t, &again, testSpec, s, recs, chunk)
		if !bytes.Equal(again.Bytes(), first.Bytes()) || !reflect.DeepEqual(got, want) {
			t.Errorf("chunk %d: different file (%d bytes %s, want %d bytes %s)", chunk, got.Size, got.SHA256, want.Size, want.SHA256)
		}
	}
	if got := build(t, io.Discard, testSpec, s, recs, 0); !reflect.DeepEqual(got, want) {
		t.Errorf("measuring into io.Discard gave %+v, want %+v", got, want)
	}

	// The caller may reuse its buffers as soon as Add returns.
	var reused bytes.Buffer
	b, err := NewBuilder(&reused, testSpec, s)
	if err != nil {
		t.Fatal(err)
	}
	var scratch []byte
	for _, r := range recs {
		scratch = append(scratch[:0], r.Value...)
		if r.Value == nil {
			scratch = nil
		}
		r.Value = scratch
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
		for i := range scratch {
			scratch[i] = 'X'
		}
	}
	if got, err := b.Close(); err != nil || got.SHA256 != want.SHA256 {
		t.Errorf("with a reused value buffer: %s, %v; want %s", got.SHA256, err, want.SHA256)
	}

	// Settings are part of the identity of a file.
	other := s
	other.PageBufferBytes *= 2
	if got := build(t, io.Discard, testSpec, other, recs, 0); got.SHA256 == want.SHA256 {
		t.Error("a different page size gave the same file")
	}
}

func TestEveryCodecIsDeterministic(t *testing.T) {
	recs := makeRecords(1500, 9, 0)
	sizes := map[string]int64{}
	for codec := range codecs {
		s := smallSettings()
		s.Compression = codec
		a := build(t, io.Discard, testSpec, s, recs, 0)
		b := build(t, io.Discard, testSpec, s, recs, 64)
		if a.SHA256 != b.SHA256 {
			t.Errorf("%s: two builds differ", codec)
		}
		sizes[codec] = a.Size
	}
	if sizes["zstd"] >= sizes["none"] || sizes["snappy"] >= sizes["none"] || sizes["gzip"] >= sizes["none"] {
		t.Errorf("compression does not compress: %v", sizes)
	}
}

const childEnv = "MINK_PARQUETBUILD_CHILD"

// TestBuildInChildProcess is the child side of TestSameBytesInAnotherProcess: it builds
// the records and prints the stats as JSON.
func TestBuildInChildProcess(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("run by TestSameBytesInAnotherProcess")
	}
	st := build(t, io.Discard, testSpec, smallSettings(), childRecords(), 0)
	out, _ := json.Marshal(st)
	os.Stdout.Write(append([]byte("STATS "), out...))
	os.Stdout.Write([]byte("\n"))
}

func childRecords() []record.Record { return makeRecords(3000, 77, 25) }

func TestSameBytesInAnotherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	want := build(t, io.Discard, testSpec, smallSettings(), childRecords(), 0)

	cmd := exec.Command(os.Args[0], "-test.run=^TestBuildInChildProcess$", "-test.count=1")
	// Another scheduler and garbage collector setting: neither may show in the bytes.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GOMAXPROCS=1", "GOGC=5")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var got FileStats
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		if js, ok := strings.CutPrefix(line, "STATS "); ok {
			if err := json.Unmarshal([]byte(js), &got); err != nil {
				t.Fatal(err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("child printed no stats:\n%s", out)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("another process built a different file:\n got %+v\nwant %+v", got, want)
	}
}
