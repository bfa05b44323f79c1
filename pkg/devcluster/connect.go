package devcluster

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// connectParams is what the snippets of ConnectFile are made of.
type connectParams struct {
	Auth          bool
	AuthFile      string // as the developer's shell names it
	Admin, Reader string // principal ids
	AdminSecret   string
	ReaderSecret  string
	ReaderScope   string // "default.*"

	Catalog     string // http://127.0.0.1:8181: the first file server's
	TokenURI    string // Catalog + /v1/oauth/tokens
	S3          string // http://127.0.0.1:9000
	S3Host      string // 127.0.0.1:9000 (DuckDB takes no scheme)
	GRPC        string // 127.0.0.1:7070
	Console     string // http://127.0.0.1:7080/: the first node's console; "" when off
	FileServers []fileServer
	Table       string // default.demo
	TableName   string // demo (namespace default)
	AvroTable   string // default.demo_avro

	Export  string   // the export line of minkctl's variables
	Minkctl string   // the minkctl binary
	Grpcurl string   // the grpcurl binary
	Tour    []string // the lines of the banner's tour
}

// fileServer is one file server's addresses: every one serves every table.
type fileServer struct{ ID, Catalog, S3 string }

func newConnectParams(c *Config, info RunInfo, da *DevAuth) connectParams {
	u, _ := url.Parse(info.S3URL)
	minkctl := rel(filepath.Join(c.BinDir, "minkctl"))
	p := connectParams{
		Catalog: info.CatalogURL, TokenURI: info.CatalogURL + "/v1/oauth/tokens", S3: info.S3URL, S3Host: u.Host,
		GRPC: Addr(c.GRPCPort), Console: c.ConsoleURL(), Table: info.Table, TableName: c.Table, AvroTable: info.Avro.Table,
		Export: exportLine(c, info, da), Minkctl: minkctl, Grpcurl: grpcurlCommand(c), Tour: TourLines(minkctl, info.KafkaBrokers),
	}
	for _, n := range c.Nodes() {
		if n.Role == "fileserver" {
			p.FileServers = append(p.FileServers, fileServer{n.ID, "http://" + Addr(n.CatalogPort), "http://" + Addr(n.S3Port)})
		}
	}
	if da != nil {
		p.Auth, p.AuthFile = true, rel(da.Path)
		p.Admin, p.AdminSecret = da.Admin.ID, da.Admin.Secret
		p.Reader, p.ReaderSecret = da.Reader.ID, da.Reader.Secret
		p.ReaderScope = strings.Join(da.Reader.Tables, ", ")
		if p.ReaderScope == "" {
			p.ReaderScope = "every table (an admin)"
		}
	}
	return p
}

// writeConnect writes ConnectFile: readable by its owner only, as it holds the secrets.
func writeConnect(path string, c *Config, info RunInfo, da *DevAuth) error {
	var b bytes.Buffer
	if err := connectTemplate.Execute(&b, newConnectParams(c, info, da)); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil { // an older file's mode does not carry over
		return err
	}
	return os.Rename(tmp, path)
}

// The snippets, per engine: the catalog takes OAuth2 client credentials (id:secret,
// exchanged at POST /v1/oauth/tokens for a token); S3 reads use the credentials the
// catalog vends with each table load (X-Iceberg-Access-Delegation: vended-credentials),
// or the principal's id and secret as static keys.
var connectTemplate = template.Must(template.New("connect").Parse(
	"# Connecting to the make dev cluster\n" +
		"\n" +
		"Written by make dev on every run, with this run's addresses{{if .Auth}} and credentials{{end}}.\n" +
		"{{if .Auth}}" +
		"The credentials come from {{.AuthFile}}, generated on the first run and kept since (stop the\n" +
		"cluster and delete it for new secrets). This file holds them too: it is readable by you only.\n" +
		"\n" +
		"| principal | secret | may |\n" +
		"|---|---|---|\n" +
		"| {{.Admin}} | `{{.AdminSecret}}` | every call: create, alter and drop tables, drain nodes, read everything |\n" +
		"| {{.Reader}} | `{{.ReaderSecret}}` | read {{.ReaderScope}}: catalog, S3, the admin API's read calls |\n" +
		"\n" +
		"- Iceberg REST catalog {{.Catalog}}: OAuth2 client credentials (`credential={{.Reader}}:<secret>`,\n" +
		"  exchanged at `POST {{.TokenURI}}`), or a principal's secret as the bearer token.\n" +
		"- S3 {{.S3}} (bucket `mink`, path-style, region `us-east-1`): the credentials the catalog vends\n" +
		"  with a table load, or the principal's id and secret as static keys (access key `{{.Reader}}`,\n" +
		"  secret key its secret). A load carries S3 credentials only when the client asks for them with\n" +
		"  the header `X-Iceberg-Access-Delegation: vended-credentials` (Spark: `header.X-Iceberg-Access-Delegation`;\n" +
		"  Trino: `vended-credentials-enabled`; DuckDB, PyIceberg and iceberg-go send it by default); they\n" +
		"  are the access key id, the secret key and a session token, all three needed.\n" +
		"- Admin gRPC {{.GRPC}}: `authorization: Bearer <secret or token>` metadata; health and\n" +
		"  reflection need none.\n" +
		"{{else}}" +
		"Auth is OFF (--auth=false): every door answers anyone, and no credentials are needed.\n" +
		"{{end}}" +
		"\n" +
		"{{if .Console}}## Console\n" +
		"\n" +
		"Open {{.Console}} in a browser (every node serves one, on the ports after it): the cluster's\n" +
		"nodes and leases, the tables and their lag, their rows, the file servers and charts of the last\n" +
		"15 minutes.{{if .Auth}} Sign in with a principal's id and secret: {{.Admin}} may drain nodes and\n" +
		"create and alter tables there, {{.Reader}} sees its tables only.{{end}}\n" +
		"\n" +
		"{{end}}## File servers\n" +
		"\n" +
		"Every file server serves every table (a read that lands on one that does not own the file is\n" +
		"forwarded to the owner): point an engine at any of them. The snippets below use the first.\n" +
		"\n" +
		"| file server | Iceberg REST catalog | S3 |\n" +
		"|---|---|---|\n" +
		"{{range .FileServers}}| {{.ID}} | {{.Catalog}} | {{.S3}} |\n{{end}}" +
		"\n" +
		"## minkctl\n" +
		"\n" +
		"```sh\n" +
		"{{.Export}}\n" +
		"{{.Minkctl}} status --cluster\n" +
		"{{.Minkctl}} table list\n" +
		"{{.Minkctl}} table describe {{.AvroTable}}   # SCHEMA: the table's version and its Iceberg schema id (not the registry's)\n" +
		"{{.Minkctl}} scan {{.Table}} --limit 10{{if .Auth}} --token {{.ReaderSecret}}   # as the {{.Reader}}{{end}}\n" +
		"{{.Minkctl}} topic list\n" +
		"{{range .Tour}}{{.}}\n{{end}}" +
		"```\n" +
		"\n" +
		"## grpcurl\n" +
		"\n" +
		"`-emit-defaults` shows zero values too (partition 0, a lag of 0), which grpcurl leaves out otherwise.\n" +
		"\n" +
		"```sh\n" +
		"{{.Grpcurl}} -plaintext {{.GRPC}} list   # reflection: open\n" +
		"{{.Grpcurl}} -plaintext -emit-defaults {{if .Auth}}-H 'authorization: Bearer {{.AdminSecret}}' {{end}}-d '{}' {{.GRPC}} mink.admin.v1.AdminService/ListNodes\n" +
		"{{.Grpcurl}} -plaintext -emit-defaults {{if .Auth}}-H 'authorization: Bearer {{.ReaderSecret}}' {{end}}-d '{\"name\":\"{{.TableName}}\"}' {{.GRPC}} mink.admin.v1.AdminService/DescribeTable\n" +
		"```\n" +
		"\n" +
		"## curl: a token, for clients that take only a bearer (iceberg-js, scripts)\n" +
		"\n" +
		"```sh\n" +
		"{{if .Auth}}" +
		"# the answer is {\"access_token\":\"…\",\"token_type\":\"bearer\",\"expires_in\":…}; its access_token is the bearer\n" +
		`TOKEN=$(curl -s {{.TokenURI}} -d grant_type=client_credentials -d client_id={{.Reader}} -d client_secret={{.ReaderSecret}} -d scope=catalog | sed -E 's/.*"access_token":"([^"]+)".*/\1/')` + "\n" +
		"curl -s -H \"Authorization: Bearer $TOKEN\" -H 'X-Iceberg-Access-Delegation: vended-credentials' \\\n" +
		"  {{.Catalog}}/v1/namespaces/default/tables/{{.TableName}}   # \"config\" and \"storage-credentials\" carry the S3 keys\n" +
		"{{else}}" +
		"curl -s {{.Catalog}}/v1/namespaces/default/tables/{{.TableName}}   # auth is off: no token\n" +
		"{{end}}" +
		"```\n" +
		"\n" +
		"## aws-cli\n" +
		"\n" +
		"```sh\n" +
		"{{if .Auth}}" +
		"export AWS_ACCESS_KEY_ID={{.Reader}} AWS_SECRET_ACCESS_KEY={{.ReaderSecret}} AWS_DEFAULT_REGION=us-east-1\n" +
		"aws --endpoint-url {{.S3}} s3 ls s3://mink/default/{{.TableName}}/\n" +
		"aws --endpoint-url {{.S3}} s3 ls --recursive --summarize s3://mink/default/{{.TableName}}/data/\n" +
		"# vended credentials instead: the load's s3.access-key-id, s3.secret-access-key and s3.session-token\n" +
		"# as AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (all three)\n" +
		"{{else}}" +
		"aws --endpoint-url {{.S3}} --no-sign-request --region us-east-1 s3 ls s3://mink/default/{{.TableName}}/\n" +
		"{{end}}" +
		"```\n" +
		"\n" +
		"## Spark\n" +
		"\n" +
		"```sh\n" +
		"# with --packages org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.9.2,org.apache.iceberg:iceberg-aws-bundle:1.9.2\n" +
		"spark-sql \\\n" +
		"  --conf spark.sql.catalog.mink=org.apache.iceberg.spark.SparkCatalog \\\n" +
		"  --conf spark.sql.catalog.mink.type=rest \\\n" +
		"  --conf spark.sql.catalog.mink.uri={{.Catalog}} \\\n" +
		"{{if .Auth}}" +
		"  --conf spark.sql.catalog.mink.rest.auth.type=oauth2 \\\n" +
		"  --conf spark.sql.catalog.mink.credential={{.Reader}}:{{.ReaderSecret}} \\\n" +
		"  --conf spark.sql.catalog.mink.oauth2-server-uri={{.TokenURI}} \\\n" +
		"  --conf spark.sql.catalog.mink.header.X-Iceberg-Access-Delegation=vended-credentials \\\n" +
		"{{end}}" +
		"  --conf spark.sql.catalog.mink.io-impl=org.apache.iceberg.aws.s3.S3FileIO \\\n" +
		"  --conf spark.sql.catalog.mink.s3.endpoint={{.S3}} \\\n" +
		"  --conf spark.sql.catalog.mink.s3.path-style-access=true \\\n" +
		"  --conf spark.sql.catalog.mink.client.region=us-east-1\n" +
		"# SELECT * FROM mink.{{.Table}} LIMIT 10;\n" +
		"{{if .Auth}}" +
		"# Static S3 keys instead of vended ones: drop the header.X-Iceberg-Access-Delegation line and add\n" +
		"#   --conf spark.sql.catalog.mink.s3.access-key-id={{.Reader}} --conf spark.sql.catalog.mink.s3.secret-access-key={{.ReaderSecret}}\n" +
		"{{end}}" +
		"```\n" +
		"\n" +
		"## Trino\n" +
		"\n" +
		"`etc/catalog/mink.properties`:\n" +
		"\n" +
		"```properties\n" +
		"connector.name=iceberg\n" +
		"iceberg.catalog.type=rest\n" +
		"iceberg.rest-catalog.uri={{.Catalog}}\n" +
		"{{if .Auth}}" +
		"iceberg.rest-catalog.security=OAUTH2\n" +
		"iceberg.rest-catalog.oauth2.credential={{.Reader}}:{{.ReaderSecret}}\n" +
		"iceberg.rest-catalog.oauth2.server-uri={{.TokenURI}}\n" +
		"iceberg.rest-catalog.vended-credentials-enabled=true\n" +
		"{{end}}" +
		"# older Trino releases: fs.native-s3.enabled=true\n" +
		"fs.s3.enabled=true\n" +
		"s3.endpoint={{.S3}}\n" +
		"s3.path-style-access=true\n" +
		"s3.region=us-east-1\n" +
		"{{if .Auth}}" +
		"# Static S3 keys instead of vended ones: drop vended-credentials-enabled and set\n" +
		"# s3.aws-access-key={{.Reader}}\n" +
		"# s3.aws-secret-key={{.ReaderSecret}}\n" +
		"{{else}}" +
		"s3.aws-access-key=mink\n" +
		"s3.aws-secret-key=mink\n" +
		"{{end}}" +
		"```\n" +
		"\n" +
		"## DuckDB\n" +
		"\n" +
		"```sql\n" +
		"INSTALL iceberg; LOAD iceberg; INSTALL httpfs; LOAD httpfs;\n" +
		"{{if .Auth}}" +
		"CREATE SECRET mink_catalog (TYPE iceberg, CLIENT_ID '{{.Reader}}', CLIENT_SECRET '{{.ReaderSecret}}',\n" +
		"                            OAUTH2_SERVER_URI '{{.TokenURI}}');\n" +
		"-- S3: the credentials the catalog vends with each table (DuckDB asks for them by default).\n" +
		"ATTACH '' AS mink (TYPE iceberg, ENDPOINT '{{.Catalog}}', SECRET mink_catalog);\n" +
		"SELECT count(*) FROM mink.{{.Table}};\n" +
		"-- Static S3 keys instead: ATTACH with ACCESS_DELEGATION_MODE 'none' after\n" +
		"-- CREATE SECRET mink_s3 (TYPE s3, KEY_ID '{{.Reader}}', SECRET '{{.ReaderSecret}}', REGION 'us-east-1',\n" +
		"--                        ENDPOINT '{{.S3Host}}', URL_STYLE 'path', USE_SSL false);\n" +
		"{{else}}" +
		"CREATE SECRET (TYPE s3, KEY_ID 'mink', SECRET 'mink', REGION 'us-east-1',\n" +
		"               ENDPOINT '{{.S3Host}}', URL_STYLE 'path', USE_SSL false);\n" +
		"ATTACH '' AS mink (TYPE iceberg, ENDPOINT '{{.Catalog}}', AUTHORIZATION_TYPE 'none');\n" +
		"SELECT count(*) FROM mink.{{.Table}};\n" +
		"{{end}}" +
		"```\n" +
		"\n" +
		"## PyIceberg\n" +
		"\n" +
		"```python\n" +
		"from pyiceberg.catalog import load_catalog\n" +
		"{{if .Auth}}" +
		"# S3: PyIceberg asks for vended credentials by default (header.X-Iceberg-Access-Delegation);\n" +
		"# static keys instead: \"s3.access-key-id\": \"{{.Reader}}\", \"s3.secret-access-key\": \"{{.ReaderSecret}}\".\n" +
		"cat = load_catalog(\"mink\", type=\"rest\", uri=\"{{.Catalog}}\", credential=\"{{.Reader}}:{{.ReaderSecret}}\",\n" +
		"{{else}}" +
		"cat = load_catalog(\"mink\", type=\"rest\", uri=\"{{.Catalog}}\",\n" +
		"{{end}}" +
		"{{if .Auth}}" +
		"                   **{\"oauth2-server-uri\": \"{{.TokenURI}}\", \"s3.endpoint\": \"{{.S3}}\", \"s3.region\": \"us-east-1\"})\n" +
		"{{else}}" +
		"                   **{\"s3.endpoint\": \"{{.S3}}\", \"s3.region\": \"us-east-1\"})\n" +
		"{{end}}" +
		"print(cat.load_table(\"{{.Table}}\").scan(limit=10).to_arrow())\n" +
		"```\n" +
		"\n" +
		"## iceberg-go\n" +
		"\n" +
		"```go\n" +
		"import _ \"github.com/apache/iceberg-go/io/gocloud/s3\" // registers the s3:// FileIO\n" +
		"{{if .Auth}}" +
		"// S3: iceberg-go asks for vended credentials by default.\n" +
		"cat, _ := rest.NewCatalog(ctx, \"mink\", \"{{.Catalog}}\", rest.WithCredential(\"{{.Reader}}:{{.ReaderSecret}}\"))\n" +
		"{{else}}" +
		"cat, _ := rest.NewCatalog(ctx, \"mink\", \"{{.Catalog}}\")\n" +
		"{{end}}" +
		"tbl, _ := cat.LoadTable(ctx, table.Identifier{\"default\", \"{{.TableName}}\"})\n" +
		"arrowTable, _ := tbl.Scan().ToArrowTable(ctx)\n" +
		"```\n"))

// connectSummary is the banner's one line on engines.
func connectSummary(path string) string {
	return fmt.Sprintf("Spark, Trino, DuckDB, PyIceberg, iceberg-go, grpcurl, minkctl: %s", rel(path))
}
