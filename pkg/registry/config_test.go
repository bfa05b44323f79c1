package registry_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/minkhq/mink/pkg/flagenv"
	"github.com/minkhq/mink/pkg/registry"
)

func parse(t *testing.T, args []string, env map[string]string) (registry.Config, flagenv.Sources, error) {
	t.Helper()
	var c registry.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	src, err := flagenv.ParseEnv(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return c, src, err
}

func TestFlags(t *testing.T) {
	c, _, err := parse(t, nil, nil)
	if err != nil || c != (registry.Config{Timeout: 10 * time.Second}) {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}

	ca := writePEM(t, otherCA(t))
	c, _, err = parse(t, []string{"--schema-registry-timeout=5s", "--schema-registry-username=flag-user"}, map[string]string{
		"MINK_SCHEMA_REGISTRY_URL":          "https://registry:8081",
		"MINK_SCHEMA_REGISTRY_USERNAME":     "env-user",
		"MINK_SCHEMA_REGISTRY_PASSWORD":     "pw",
		"MINK_SCHEMA_REGISTRY_BEARER_TOKEN": "tok",
		"MINK_SCHEMA_REGISTRY_CA_FILE":      ca,
		"MINK_SCHEMA_REGISTRY_TIMEOUT":      "3s",
	})
	want := registry.Config{URL: "https://registry:8081", Username: "flag-user", Password: "pw",
		BearerToken: "tok", CAFile: ca, Timeout: 5 * time.Second}
	if err != nil || c != want {
		t.Fatalf("parsed %+v, %v; want %+v (flags win over env)", c, err, want)
	}

	_, _, err = parse(t, nil, map[string]string{"MINK_SCHEMA_REGISTRY_TIMEOUT": "soon"})
	if err == nil || !strings.Contains(err.Error(), "--schema-registry-timeout (set by MINK_SCHEMA_REGISTRY_TIMEOUT)") {
		t.Errorf("bad env timeout: %v", err)
	}

	// Validate errors name the variable that set a bad flag.
	c, src, err := parse(t, nil, map[string]string{"MINK_SCHEMA_REGISTRY_USERNAME": "u"})
	if err != nil {
		t.Fatal(err)
	}
	err = src.Explain(c.Validate())
	if err == nil || !strings.Contains(err.Error(), "--schema-registry-username (set by MINK_SCHEMA_REGISTRY_USERNAME): is set but --schema-registry-url is empty") {
		t.Errorf("explained: %v", err)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := writePEM(t, otherCA(t))

	for _, cfg := range []registry.Config{
		{},
		{URL: "http://registry:8081"},
		{URL: "https://registry.example.com/prefix/"},
		{URL: "https://user:pass@registry:8081"},
		{URL: "https://registry:8081", Username: "u", Password: "p"},
		{URL: "https://registry:8081", BearerToken: "tok.en-123_=="},
		{URL: "https://registry:8081", CAFile: ca, Timeout: time.Minute},
		{URL: "http://registry:8081", Timeout: 0}, // 0: the default
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("%v: %v", cfg, err)
		}
	}

	for _, tc := range []struct {
		name string
		cfg  registry.Config
		want []string // every one in the error
	}{
		{"credentials without url", registry.Config{Username: "u", Password: "p", BearerToken: "t", CAFile: ca}, []string{
			"--schema-registry-username: is set but --schema-registry-url is empty",
			"--schema-registry-password: is set", "--schema-registry-bearer-token: is set", "--schema-registry-ca-file: is set"}},
		{"scheme", registry.Config{URL: "ftp://registry:8081"}, []string{"--schema-registry-url: ftp://registry:8081 is not an http or https URL"}},
		{"no scheme", registry.Config{URL: "registry:8081"}, []string{"--schema-registry-url:", "not an http or https URL"}},
		{"host and port only", registry.Config{URL: "127.0.0.1:8081"}, []string{"--schema-registry-url: not a URL"}},
		{"no host", registry.Config{URL: "http:///path"}, []string{"--schema-registry-url:", "names no host"}},
		{"query", registry.Config{URL: "http://registry:8081/?x=1"}, []string{"--schema-registry-url:", "query"}},
		{"user without password", registry.Config{URL: "https://user@registry:8081"}, []string{"--schema-registry-url: its user info needs a user and a password"}},
		{"url and flag basic auth", registry.Config{URL: "https://user:pass@registry:8081", Username: "u", Password: "p"},
			[]string{"--schema-registry-username: conflicts with the user info in --schema-registry-url"}},
		{"url user info and flag password", registry.Config{URL: "https://user:pass@registry:8081", Password: "p"},
			[]string{"--schema-registry-password: conflicts with the user info in --schema-registry-url"}},
		{"username alone", registry.Config{URL: "http://registry:8081", Username: "u"}, []string{"--schema-registry-password: required with --schema-registry-username"}},
		{"password alone", registry.Config{URL: "http://registry:8081", Password: "p"}, []string{"--schema-registry-username: required with --schema-registry-password"}},
		{"token and basic auth", registry.Config{URL: "http://registry:8081", Username: "u", Password: "p", BearerToken: "t"},
			[]string{"--schema-registry-bearer-token: conflicts with basic auth (--schema-registry-username/--schema-registry-password"}},
		{"token and url user info", registry.Config{URL: "https://user:pass@registry:8081", BearerToken: "t"},
			[]string{"--schema-registry-bearer-token: conflicts with basic auth", "--schema-registry-url"}},
		{"token with newline", registry.Config{URL: "http://registry:8081", BearerToken: "tok\n"}, []string{"--schema-registry-bearer-token: contains a space or control character"}},
		{"password with newline", registry.Config{URL: "http://registry:8081", Username: "u", Password: "p\n"}, []string{"--schema-registry-password: contains a control character"}},
		{"missing ca file", registry.Config{URL: "https://registry:8081", CAFile: filepath.Join(dir, "nope.pem")}, []string{"--schema-registry-ca-file:", "no such file"}},
		{"empty ca file", registry.Config{URL: "https://registry:8081", CAFile: empty}, []string{"--schema-registry-ca-file: " + empty + ": no PEM certificate in it"}},
		{"ca file without certificates", registry.Config{URL: "https://registry:8081", CAFile: junk}, []string{"--schema-registry-ca-file:", "no PEM certificate in it"}},
		{"ca file for http", registry.Config{URL: "http://registry:8081", CAFile: ca}, []string{"--schema-registry-ca-file: is set but --schema-registry-url http://registry:8081 is not https"}},
		{"negative timeout", registry.Config{URL: "http://registry:8081", Timeout: -time.Second}, []string{"--schema-registry-timeout: -1s is negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil {
				t.Fatal("no error")
			}
			if fe := (*flagenv.FlagError)(nil); !errors.As(err, &fe) {
				t.Errorf("not a flagenv.FlagError: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if c, nerr := registry.New(tc.cfg); c != nil || nerr == nil || nerr.Error() != err.Error() {
				t.Errorf("New = %v, %v; want Validate's error", c, nerr)
			}
		})
	}
}

func TestConfigString(t *testing.T) {
	for cfg, want := range map[registry.Config]string{
		{}: "no schema registry",
		{URL: "https://user:pass@registry:8081", CAFile: "/etc/ca.pem"}:                   "schema registry https://registry:8081 (basic auth from the URL's user info, CA file /etc/ca.pem, timeout 10s)",
		{URL: "http://registry:8081", Username: "u", Password: "p", Timeout: time.Second}: "schema registry http://registry:8081 (basic auth from --schema-registry-username, timeout 1s)",
		{URL: "http://registry:8081", BearerToken: "t"}:                                   "schema registry http://registry:8081 (bearer token from --schema-registry-bearer-token, timeout 10s)",
		{URL: "http://registry:8081"}:                                                     "schema registry http://registry:8081 (no credentials, timeout 10s)",
	} {
		if got := cfg.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

// No secret (password, token, URL user info) shows in any message: String, Validate
// and New errors, the Client's errors of every kind.
func TestNoSecretsInMessages(t *testing.T) {
	const (
		urlUser  = "urlUserSecret1"
		urlPass  = "urlPassSecret2"
		password = "flagPassSecret3"
		token    = "tokenSecret4"
	)
	secrets := []string{urlUser, urlPass, password, token}
	var msgs []string
	add := func(what string, v any) {
		if v != nil {
			msgs = append(msgs, fmt.Sprintf("%s: %v", what, v))
		}
	}

	reg := newRegistry(t, srfake.WithAuth(basic("mink", "right")))
	host := strings.TrimPrefix(reg.URL(), "http://")
	withSecret := "http://" + urlUser + ":" + urlPass + "@" + host
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + urlUser + ":" + urlPass + "@" + l.Addr().String()
	l.Close()
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	untrusted := "https://" + urlUser + ":" + urlPass + "@" + strings.TrimPrefix(tlsSrv.URL, "https://")
	failing := srfake.New()
	t.Cleanup(failing.Close)
	failing.Intercept(func(w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(500)
		return true
	})

	bad := []registry.Config{
		{URL: "https://" + urlUser + ":" + urlPass + "@registry:bad-port"},
		{URL: "https://" + urlUser + ":" + urlPass + "@registry:8081/%zz"},
		{URL: "https://" + urlUser + ":" + urlPass + "%zz@registry:8081"},
		{URL: "ftp://" + urlUser + ":" + urlPass + "@registry:8081"},
		{URL: "https://" + urlUser + ":" + urlPass + "@registry:8081/?key=" + token},
		{URL: "https://" + urlUser + ":" + urlPass + "@registry:8081#" + token},
		{URL: "https://" + urlUser + ":" + urlPass + "@registry:8081", Username: "u", Password: password},
		{URL: "https://" + urlUser + ":" + urlPass + "@registry:8081", BearerToken: token},
		{URL: "https://" + urlUser + "@registry:8081"},
		{URL: "http://registry:8081", Username: "u", Password: password + "\n"},
		{URL: "http://registry:8081", BearerToken: token + "\n"},
		{URL: "http://registry:8081", Username: "u", Password: password, BearerToken: token},
		{URL: "http://" + urlUser + ":" + urlPass + "@registry:8081", CAFile: "/no/such/ca.pem"},
		{Password: password, BearerToken: token},
	}
	for _, cfg := range bad {
		add("String", cfg)
		add("%+v in a struct", fmt.Sprintf("%+v", struct{ Registry registry.Config }{cfg}))
		add("Validate", cfg.Validate())
		_, err := registry.New(cfg)
		add("New", err)
	}
	good := []registry.Config{
		{URL: withSecret},
		{URL: reg.URL(), Username: "mink", Password: password},
		{URL: reg.URL(), BearerToken: token},
		{URL: closed},
		{URL: untrusted},
		{URL: "http://" + urlUser + ":" + urlPass + "@" + strings.TrimPrefix(failing.URL(), "http://")},
	}
	for _, cfg := range good {
		add("String", cfg)
		c := newClient(t, cfg)
		add("Client.String", c.String())
		add("Client.URL", c.URL())
		for _, get := range []func() (registry.Schema, error){
			func() (registry.Schema, error) { return c.ByID(t.Context(), 2) },
			func() (registry.Schema, error) { return c.Latest(t.Context(), "orders-value") },
			func() (registry.Schema, error) { return c.ByVersion(t.Context(), "orders-value", 1) },
		} {
			_, err := get()
			if err == nil {
				t.Errorf("%v: no error", cfg)
			}
			add("fetch", err)
		}
	}
	if len(msgs) < 50 {
		t.Fatalf("only %d messages", len(msgs))
	}
	for _, m := range msgs {
		for _, s := range secrets {
			if strings.Contains(m, s) {
				t.Errorf("message shows a secret: %s", m)
			}
		}
	}
}
