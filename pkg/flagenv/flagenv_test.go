package flagenv_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minkhq/mink/pkg/flagenv"
)

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{"lease-ttl": "MINK_LEASE_TTL", "addr": "MINK_ADDR", "node-id": "MINK_NODE_ID"} {
		if got := flagenv.EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	newFS := func() (*flag.FlagSet, *time.Duration, *string, *flagenv.Bytes) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		ttl := fs.Duration("lease-ttl", time.Second, "")
		url := fs.String("postgres-url", "", "")
		b := new(flagenv.Bytes)
		fs.Var(b, "cache-bytes", "")
		return fs, ttl, url, b
	}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}

	fs, ttl, url, b := newFS()
	src, err := flagenv.ParseEnv(fs, []string{"--lease-ttl", "2s"},
		env(map[string]string{"MINK_LEASE_TTL": "9s", "MINK_POSTGRES_URL": "postgres://x", "MINK_CACHE_BYTES": "512MiB"}))
	if err != nil {
		t.Fatal(err)
	}
	if *ttl != 2*time.Second || *url != "postgres://x" || *b != 512<<20 {
		t.Errorf("got ttl %v url %q bytes %d", *ttl, *url, *b)
	}
	if src["postgres-url"] != "MINK_POSTGRES_URL" || src["lease-ttl"] != "" {
		t.Errorf("sources %v", src)
	}
	// A later validation error about a flag set from env names the variable.
	err = src.Explain(errors.Join(flagenv.Errorf("postgres-url", "bad"), flagenv.Errorf("lease-ttl", "short")))
	if !strings.Contains(err.Error(), "--postgres-url (set by MINK_POSTGRES_URL): bad") || !strings.Contains(err.Error(), "--lease-ttl: short") {
		t.Errorf("explained: %v", err)
	}

	fs, _, _, _ = newFS()
	_, err = flagenv.ParseEnv(fs, nil, env(map[string]string{"MINK_LEASE_TTL": "soon"}))
	var fe *flagenv.FlagError
	if !errors.As(err, &fe) || fe.Flag != "lease-ttl" || fe.Env != "MINK_LEASE_TTL" || !strings.Contains(err.Error(), `"soon"`) {
		t.Errorf("bad env value: %v", err)
	}
}

func TestBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1000": 1000, "10GiB": 10 << 30, "512 MiB": 512 << 20, "2KB": 2000, "3B": 3} {
		var b flagenv.Bytes
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "-1", "12XB", "1.5GiB", "99999999999TiB"} {
		var b flagenv.Bytes
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) accepted: %d", in, b)
		}
	}
	b := flagenv.Bytes(10 << 30)
	if b.String() != "10GiB" {
		t.Errorf("String() = %q", b.String())
	}
	var l flagenv.List
	l.Set(" a:1, ,b:2 ")
	if len(l) != 2 || l[1] != "b:2" {
		t.Errorf("List %q", l)
	}
}
