package flagenv_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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

// A Secret's value shows nowhere a value is usually printed: fmt verbs, a struct printed
// whole, slog, JSON, the flag package's defaults; only Reveal gives it.
func TestSecretNeverPrints(t *testing.T) {
	type config struct {
		User     string
		Password flagenv.Secret
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c := config{User: "u"}
	fs.StringVar(&c.User, "user", "u", "")
	fs.Var(&c.Password, "password", "the password")
	if _, err := flagenv.ParseEnv(fs, nil, func(k string) (string, bool) {
		return "hunter2", k == "MINK_PASSWORD"
	}); err != nil {
		t.Fatal(err)
	}
	if c.Password.Reveal() != "hunter2" {
		t.Fatalf("Reveal = %q", c.Password.Reveal())
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "password", c.Password, "config", c)
	js, _ := json.Marshal(c)
	var defaults bytes.Buffer
	fs.SetOutput(&defaults)
	fs.PrintDefaults()
	for _, shown := range []string{fmt.Sprint(c.Password), fmt.Sprintf("%v %+v %#v %s %q %x", c, c, c, c.Password, c.Password, c.Password),
		logged.String(), string(js), defaults.String(), fs.Lookup("password").Value.String()} {
		if strings.Contains(shown, "hunter2") || strings.Contains(shown, "68756e74657232") {
			t.Errorf("the secret shows in %q", shown)
		}
	}
	if !strings.Contains(string(js), `"\u003credacted\u003e"`) {
		t.Errorf("JSON %s: want the secret redacted", js)
	}
	var empty flagenv.Secret
	if empty.String() != "" {
		t.Errorf("an empty secret prints as %q", empty.String())
	}
}
