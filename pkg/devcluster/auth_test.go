package devcluster

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/registry"
)

// The first run writes an auth config with a fresh cluster secret and two principals;
// every later run keeps it, so the secrets engines were given stay good.
func TestAuthConfigIsGeneratedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	da, err := ensureAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !da.Created || da.Path != filepath.Join(dir, AuthFile) {
		t.Errorf("first run: created %v at %s", da.Created, da.Path)
	}
	st, err := os.Stat(da.Path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600: it holds the secrets", da.Path, st.Mode().Perm())
	}
	raw, _ := os.ReadFile(da.Path)
	f, err := auth.ParseFile(raw)
	if err != nil {
		t.Fatalf("the roles would refuse it: %v\n%s", err, raw)
	}
	if len(f.ClusterSecret) < 64 || len(f.Principals) != 2 {
		t.Fatalf("config %s", raw)
	}
	admin, reader := f.Principals[0], f.Principals[1]
	if admin.ID != AdminID || admin.Role != auth.RoleAdmin || reader.ID != ReaderID || reader.Role != auth.RoleReader ||
		!slices.Equal(reader.Tables, []string{ReaderTables}) {
		t.Errorf("principals %+v", f.Principals)
	}
	if da.Admin.Secret != admin.Secret || da.Reader.Secret != reader.Secret {
		t.Errorf("the launcher's credentials %+v are not the file's %+v", da, f.Principals)
	}
	a, _ := auth.New(f)
	if p, err := a.Bearer(da.Reader.Secret); err != nil || p.ID != ReaderID || !p.CanRead("default", "demo_avro") || p.CanRead("other", "t") {
		t.Errorf("reader secret as a bearer token: %+v, %v", p, err)
	}
	if strings.Contains(string(raw), "token_ttl") {
		t.Errorf("the file spells out defaults: %s", raw)
	}

	again, err := ensureAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw2, _ := os.ReadFile(da.Path)
	if again.Created || !bytes.Equal(raw, raw2) || again.Admin.Secret != da.Admin.Secret || again.Reader.Secret != da.Reader.Secret {
		t.Errorf("second run: created %v, file changed %v", again.Created, !bytes.Equal(raw, raw2))
	}

	// Two configs never share a secret.
	other, err := ensureAuth(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if other.Admin.Secret == da.Admin.Secret || other.Reader.Secret == da.Reader.Secret {
		t.Error("two generated configs share a secret")
	}
}

func TestAuthConfigThatDoesNotParseStopsTheLauncher(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, AuthFile)
	os.WriteFile(path, []byte(`{"cluster_secret": "short", "principals": []}`), 0o600)
	if _, err := ensureAuth(dir); err == nil || !strings.Contains(err.Error(), "cluster_secret") || !strings.Contains(err.Error(), AuthFile) {
		t.Errorf("bad file: %v", err)
	}
	os.WriteFile(path, []byte(`{"cluster_secret": "`+strings.Repeat("s", 40)+`",
		"principals": [{"id": "etl", "secret": "`+strings.Repeat("e", 20)+`", "role": "reader", "tables": ["default.*"]}]}`), 0o600)
	if _, err := ensureAuth(dir); err == nil || !strings.Contains(err.Error(), "role admin") {
		t.Errorf("no admin: %v", err)
	}
	// A config of one's own: its first admin calls, its reader is shown.
	os.WriteFile(path, []byte(`{"cluster_secret": "`+strings.Repeat("s", 40)+`",
		"principals": [{"id": "etl", "secret": "`+strings.Repeat("e", 20)+`", "role": "reader", "tables": ["default.*"]},
		               {"id": "ops", "secret": "`+strings.Repeat("o", 20)+`", "role": "admin"}]}`), 0o600)
	da, err := ensureAuth(dir)
	if err != nil || da.Created || da.Admin.ID != "ops" || da.Reader.ID != "etl" {
		t.Errorf("own config: %+v, %v", da, err)
	}
}

func TestRolesGetTheAuthConfig(t *testing.T) {
	c := Defaults
	n := c.Nodes()[0]
	on := strings.Join(roleFlags(&c, n, "postgres://x", []string{"k:9092"}, registry.Config{}, "/d/auth.json").Args(), " ")
	off := strings.Join(roleFlags(&c, n, "postgres://x", []string{"k:9092"}, registry.Config{}, "").Args(), " ")
	if !strings.Contains(on, "--auth-config /d/auth.json") || strings.Contains(off, "--auth-config") {
		t.Errorf("auth on: %s\nauth off: %s", on, off)
	}

	var cfg Config
	fs := flag.NewFlagSet("minkdev", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if fs.Parse(nil); !cfg.Auth {
		t.Error("auth is off by default")
	}
	if fs.Parse([]string{"--auth=false"}); cfg.Auth {
		t.Error("--auth=false leaves it on")
	}
}

func bannerInfo(c *Config, dir string) RunInfo {
	return RunInfo{CatalogURL: c.CatalogURL(), S3URL: c.S3URL(), Table: "default.demo", Topic: "demo",
		ConnectFile: filepath.Join(dir, ConnectFile), PostgresURL: "postgres://postgres@127.0.0.1:15432/mink",
		KafkaBrokers: []string{"127.0.0.1:9092"}, FirstEventID: 1, TableState: "created",
		SchemaRegistryURL: "http://127.0.0.1:8081", SchemaRegistryEmbedded: true,
		Avro: AvroInfo{Table: "default.demo_avro", Topic: "demo_avro", Subject: "demo_avro-value", Partitions: 4,
			TableState: "created", FirstEventID: 1, SchemaIDV1: 1, EvolveAfter: c.AvroEvolveAfter}}
}

// The banner gives the credentials and the essential lines; the rest is in ConnectFile.
func TestBannerGivesTheCredentials(t *testing.T) {
	c := Defaults
	dir := t.TempDir()
	da, err := ensureAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(da.Path)
	f, _ := auth.ParseFile(raw)
	info := bannerInfo(&c, dir)
	var out bytes.Buffer
	printBanner(&out, &c, info, 4, nil, da)
	s := out.String()
	for _, want := range []string{
		"Auth", AuthFile + " (generated now", "--auth=false",
		"admin   " + da.Admin.Secret + "  role admin", "reader  " + da.Reader.Secret + "  role reader: reads default.*",
		info.ConnectFile, "credential=reader:" + da.Reader.Secret,
		"export MINK_ADDR=127.0.0.1:7070 MINK_CATALOG=http://127.0.0.1:8181 MINK_TOKEN=" + da.Admin.Secret + " ",
		"minkctl status\n", "minkctl scan default.demo --limit 10 --token " + da.Reader.Secret + " ",
		"minkctl scan default.demo_avro --limit 10   # the newest 10 rows",
		`grpcurl -plaintext -emit-defaults -H "authorization: Bearer $MINK_TOKEN" -d '{"node":"fileserver-2"}' 127.0.0.1:7070 mink.admin.v1.AdminService/GetStatus`,
		"minkctl topic create clicks --partitions 2\n", "kcat -P -b 127.0.0.1:9092 -t clicks",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("banner lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, f.ClusterSecret) {
		t.Errorf("banner shows the cluster secret:\n%s", s)
	}
	if n := strings.Count(s, "\n"); n > 40 {
		t.Errorf("banner is %d lines; keep it short (snippets go to %s):\n%s", n, ConnectFile, s)
	}

	out.Reset()
	printBanner(&out, &c, info, 4, nil, nil)
	s = out.String()
	if !strings.Contains(s, "Auth                  OFF (--auth=false)") || strings.Contains(s, "MINK_TOKEN") || strings.Contains(s, "--token") ||
		strings.Contains(s, "authorization") {
		t.Errorf("banner with auth off:\n%s", s)
	}
}

// Every engine's snippet in ConnectFile reads the demo tables as the reader: OAuth2
// client credentials for the catalog, vended (or static) S3 credentials.
func TestConnectFileSnippets(t *testing.T) {
	c := Defaults
	dir := t.TempDir()
	da, err := ensureAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(da.Path)
	f, _ := auth.ParseFile(raw)
	info := bannerInfo(&c, dir)
	os.WriteFile(info.ConnectFile, []byte("old"), 0o644) // a file of an older run is replaced, mode included
	if err := writeConnect(info.ConnectFile, &c, info, da); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(info.ConnectFile)
	b, _ := os.ReadFile(info.ConnectFile)
	s := string(b)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", info.ConnectFile, st.Mode().Perm())
	}
	r, a := da.Reader.Secret, da.Admin.Secret
	tokens := "http://127.0.0.1:8181/v1/oauth/tokens"
	sections := map[string][]string{
		"## minkctl": {"export MINK_ADDR=127.0.0.1:7070 MINK_CATALOG=http://127.0.0.1:8181 MINK_TOKEN=" + a + " ",
			"minkctl scan default.demo --limit 10 --token " + r + " ", "minkctl topic create clicks --partitions 2\n"},
		"## grpcurl": {"-plaintext -emit-defaults -H 'authorization: Bearer " + a + "' -d '{}' 127.0.0.1:7070 mink.admin.v1.AdminService/ListNodes"},
		"## File servers": {"| fileserver-1 | http://127.0.0.1:8181 | http://127.0.0.1:9000 |\n",
			"| fileserver-2 | http://127.0.0.1:8182 | http://127.0.0.1:9001 |\n"},
		"## curl: a token, for clients that take only a bearer (iceberg-js, scripts)": {"curl -s " + tokens + " -d grant_type=client_credentials -d client_id=reader -d client_secret=" + r + " ",
			"-H 'X-Iceberg-Access-Delegation: vended-credentials'", "http://127.0.0.1:8181/v1/namespaces/default/tables/demo"},
		"## aws-cli": {"export AWS_ACCESS_KEY_ID=reader AWS_SECRET_ACCESS_KEY=" + r + " ", "aws --endpoint-url http://127.0.0.1:9000 s3 ls s3://mink/default/demo/\n",
			"AWS_SESSION_TOKEN"},
		"## Spark":      {"spark.sql.catalog.mink.uri=http://127.0.0.1:8181 ", "spark.sql.catalog.mink.rest.auth.type=oauth2 ", "spark.sql.catalog.mink.credential=reader:" + r + " ", "spark.sql.catalog.mink.oauth2-server-uri=" + tokens + " ", "spark.sql.catalog.mink.header.X-Iceberg-Access-Delegation=vended-credentials ", "s3.access-key-id=reader ", "s3.secret-access-key=" + r + "\n"},
		"## Trino":      {"iceberg.rest-catalog.security=OAUTH2\n", "iceberg.rest-catalog.oauth2.credential=reader:" + r + "\n", "iceberg.rest-catalog.oauth2.server-uri=" + tokens + "\n", "iceberg.rest-catalog.vended-credentials-enabled=true\n", "s3.aws-secret-key=" + r + "\n"},
		"## DuckDB":     {"CREATE SECRET mink_catalog (TYPE iceberg, CLIENT_ID 'reader', CLIENT_SECRET '" + r + "',", "OAUTH2_SERVER_URI '" + tokens + "'", "ATTACH '' AS mink (TYPE iceberg, ENDPOINT 'http://127.0.0.1:8181', SECRET mink_catalog);", "KEY_ID 'reader', SECRET '" + r + "'"},
		"## PyIceberg":  {`credential="reader:` + r + `"`, `"oauth2-server-uri": "` + tokens + `"`},
		"## iceberg-go": {`rest.WithCredential("reader:` + r + `")`},
	}
	for head, wants := range sections {
		i := strings.Index(s, head+"\n")
		if i < 0 {
			t.Errorf("%s lacks the section %s:\n%s", ConnectFile, head, s)
			continue
		}
		sec := s[i:]
		if j := strings.Index(sec[len(head):], "\n## "); j >= 0 {
			sec = sec[:len(head)+j]
		}
		for _, want := range wants {
			if !strings.Contains(sec, want) {
				t.Errorf("%s: section %s lacks %q:\n%s", ConnectFile, head, want, sec)
			}
		}
	}
	if strings.Contains(s, f.ClusterSecret) {
		t.Errorf("%s holds the cluster secret", ConnectFile)
	}
	if !strings.Contains(s, "only when the client asks for them with\n  the header `X-Iceberg-Access-Delegation: vended-credentials`") {
		t.Errorf("%s does not say when a load carries S3 credentials", ConnectFile)
	}

	if err := writeConnect(info.ConnectFile, &c, info, nil); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(info.ConnectFile)
	if s := string(b); !strings.Contains(s, "Auth is OFF") || strings.Contains(s, "credential=") || strings.Contains(s, "WithCredential") || strings.Contains(s, "MINK_TOKEN") ||
		!strings.Contains(s, "AUTHORIZATION_TYPE 'none'") || !strings.Contains(s, "--no-sign-request") {
		t.Errorf("auth off:\n%s", s)
	}
}
