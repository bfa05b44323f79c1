package registry_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/minkhq/mink/pkg/apierr"
	"github.com/minkhq/mink/pkg/registry"
)

// The seeded schemas: each format with references across subjects, Protobuf two deep.
const (
	addressAvro = `{"type":"record","name":"Address","namespace":"com.example","fields":[{"name":"zip","type":"string"}]}`
	orderAvro   = `{"type":"record","name":"Order","namespace":"com.example","fields":[{"name":"id","type":"long"},{"name":"ship_to","type":"com.example.Address"}]}`
	order2Avro  = `{"type":"record","name":"Order","namespace":"com.example","fields":[{"name":"id","type":"long"},{"name":"ship_to","type":"com.example.Address"},{"name":"note","type":["null","string"],"default":null}]}`

	currencyProto = `syntax = "proto3"; package shop; message Currency { string code = 1; }`
	moneyProto    = `syntax = "proto3"; package shop; import "currency.proto"; message Money { int64 units = 1; Currency currency = 2; }`
	paymentProto  = `syntax = "proto3"; package shop; import "money.proto"; message Payment { string id = 1; Money amount = 2; }`

	customerJSON = `{"$id":"https://example.com/customer.json","type":"object","properties":{"name":{"type":"string"}}}`
	signupJSON   = `{"type":"object","properties":{"customer":{"$ref":"https://example.com/customer.json"}}}`
)

func seed(reg *srfake.Registry) {
	reg.SeedSchema("address-value", 1, 1, sr.Schema{Schema: addressAvro})
	reg.SeedSchema("orders-value", 1, 2, sr.Schema{Schema: orderAvro,
		References: []sr.SchemaReference{{Name: "com.example.Address", Subject: "address-value", Version: 1}}})
	reg.SeedSchema("orders-value", 2, 3, sr.Schema{Schema: order2Avro,
		References: []sr.SchemaReference{{Name: "com.example.Address", Subject: "address-value", Version: 1}}})

	reg.SeedSchema("currency", 1, 10, sr.Schema{Schema: currencyProto, Type: sr.TypeProtobuf})
	reg.SeedSchema("money", 1, 11, sr.Schema{Schema: moneyProto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "currency.proto", Subject: "currency", Version: 1}}})
	reg.SeedSchema("payments-value", 1, 12, sr.Schema{Schema: paymentProto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "money.proto", Subject: "money", Version: 1}}})

	reg.SeedSchema("customer", 1, 20, sr.Schema{Schema: customerJSON, Type: sr.TypeJSON})
	reg.SeedSchema("signups-value", 1, 21, sr.Schema{Schema: signupJSON, Type: sr.TypeJSON,
		References: []sr.SchemaReference{{Name: "https://example.com/customer.json", Subject: "customer", Version: 1}}})
}

// newRegistry is a seeded srfake registry on a local HTTP server.
func newRegistry(t testing.TB, opts ...srfake.Option) *srfake.Registry {
	t.Helper()
	reg := srfake.New(opts...)
	t.Cleanup(reg.Close)
	seed(reg)
	return reg
}

func newClient(t testing.TB, cfg registry.Config) *registry.Client {
	t.Helper()
	c, err := registry.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if c == nil {
		t.Fatal("New returned no client")
	}
	t.Cleanup(c.Close)
	return c
}

// counter counts the requests reaching a registry, by path.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func count(reg *srfake.Registry) *counter {
	c := &counter{n: map[string]int{}}
	reg.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		c.mu.Lock()
		c.n[r.URL.Path]++
		c.mu.Unlock()
		return false
	})
	return c
}

func (c *counter) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[path]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

// serve makes reg answer GET path with body, as a registry that holds what srfake
// refuses to seed (cycles, dangling references) would.
func serve(reg *srfake.Registry, path, body string) {
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != path {
			return false
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		_, _ = io.WriteString(w, body)
		return true
	})
}

// wantKind fails unless err is of kind k and its message holds every want.
func wantKind(t *testing.T, err error, k apierr.Kind, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", k)
	}
	t.Logf("%v: %v", k, err)
	if got := apierr.Classify(err); got != k {
		t.Fatalf("kind %v, want %v: %v", got, k, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if is := errors.Is(err, registry.ErrNotFound); is != (k == apierr.NotFound) {
		t.Errorf("errors.Is(err, ErrNotFound) = %v for kind %v: %v", is, k, err)
	}
}

// writePEM writes certificates as a PEM file and returns its path.
func writePEM(t testing.TB, certs ...*x509.Certificate) string {
	t.Helper()
	var b strings.Builder
	for _, c := range certs {
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// otherCA is a CA that signed nothing the tests serve.
func otherCA(t testing.TB) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "not the registry's CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
