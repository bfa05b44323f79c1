package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
)

// TestRegistryCARotation: a running indexer's --schema-registry-ca-file is rotated from
// CA A to CA B after the registry's certificate moved from A to B: CreateTable of an
// Avro table (which reads the subject from the registry) fails while the file holds A,
// succeeds once it holds B, without a restart; a broken file keeps B.
func TestRegistryCARotation(t *testing.T) {
	t.Parallel()
	a, b := tlsfilestest.NewCA(t, "registry ca a"), tlsfilestest.NewCA(t, "registry ca b")
	ofA, ofB := a.Issue(t, "registry", tlsfilestest.Loopback...), b.Issue(t, "registry", tlsfilestest.Loopback...)
	const codeAvro = `{"type":"record","name":"Code","fields":[{"name":"id","type":"long"}]}`
	reg := srfake.NewRegistry()
	srv := tlsfilestest.NewServer(t, reg.Handler(), ofA.TLS)

	caFile := filepath.Join(t.TempDir(), "registry-ca.pem")
	tlsfilestest.WriteFile(t, caFile, a.PEM)
	c := newCluster(t, regTTL)
	idx := c.Start("indexer", "idx-1", "--schema-registry-url", srv.URL, "--schema-registry-ca-file", caFile)
	for i, name := range []string{"codes_a", "codes_b", "codes_c"} {
		c.Kafka.CreateTopic(name, 1, nil)
		reg.SeedSchema(name+"-value", 1, i+1, sr.Schema{Schema: codeAvro})
	}
	createTable := func(name string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := c.Member("idx-1").Admin().CreateTable(ctx, &adminv1.CreateTableRequest{Name: name,
			Format: adminv1.RecordFormat_RECORD_FORMAT_AVRO, Properties: regProps()})
		return err
	}
	if err := createTable("codes_a"); err != nil {
		t.Fatalf("the registry's certificate of A, the file of A: %v", err)
	}

	srv.Rotate(ofB.TLS) // the registry rotates first
	err := createTable("codes_b")
	t.Logf("the registry's certificate of B, the file of A: %v", err)
	if err == nil || !strings.Contains(err.Error(), "--schema-registry-ca-file") {
		t.Fatalf("the registry's certificate of B, the file of A: %v, want an error naming --schema-registry-ca-file", err)
	}
	tlsfilestest.WriteFile(t, caFile, b.PEM)
	changed := time.Now()
	waitFor(t, 10*time.Second, "CreateTable to reach the registry once the file holds B", func() (error, bool) {
		err := createTable("codes_b")
		return err, err == nil
	})
	t.Logf("the registry's certificate of B accepted %v after the file became B", time.Since(changed).Round(time.Millisecond))

	tlsfilestest.WriteFile(t, caFile, []byte("not PEM"))
	waitFor(t, 10*time.Second, "idx-1 to log the broken CA file", func() (string, bool) {
		out := idx.Process().Output()
		return out, strings.Contains(out, "TLS CA bundle not reloaded; the one in force stays") && strings.Contains(out, caFile)
	})
	srv.CloseClientConnections() // a new handshake, with the bundle in force
	if err := createTable("codes_c"); err != nil {
		t.Fatalf("after a broken CA file (B stays): %v", err)
	}
}
