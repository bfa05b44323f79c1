package bench

import "testing"

// The bench table's leaf columns are its declared ones (tags, a list, is one) and the
// Kafka columns (_kafka_headers, a list of structs, is two), as its Parquet files have.
func TestLeafColumnsOfTheBenchTable(t *testing.T) {
	n, err := leafColumns(EventSpec)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(EventSpec.Columns) + 7; n != want {
		t.Fatalf("leaf columns of EventSpec: %d, want %d", n, want)
	}
}

func TestFileServerBuildBound(t *testing.T) {
	// README: --build-memory + --build-concurrency x (leaf columns x 1 MiB + 4 MiB).
	if got, want := fsBuildBound(2, 128<<20, 12), int64(128+2*16)<<20; got != want {
		t.Fatalf("bound: %d, want %d", got, want)
	}
}
