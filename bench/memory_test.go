package bench

import (
	"strings"
	"testing"
)

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

// Item 16's runs are whole tables: a lease count that is not a multiple of the tables'
// partitions is refused, naming the flag.
func TestScaleConfig(t *testing.T) {
	c := DefaultScaleConfig()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	c.Leases = []int{1000, 1050}
	if err := c.validate(); err == nil || !strings.Contains(err.Error(), "scale-leases: 1050") {
		t.Fatalf("1050 leases of tables of 100 partitions: %v", err)
	}
}
