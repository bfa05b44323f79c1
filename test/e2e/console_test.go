package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	adminv1 "github.com/minkhq/mink/gen/mink/admin/v1"
	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/tlsfiles/tlsfilestest"
	"github.com/minkhq/mink/test/cluster"
)

// The console (issue 31) in a real browser: headless Chromium driven by chromedp against
// a cluster of real processes with auth and TLS on, through a proxy that serves it under
// a path prefix. Helpers here are console….

// consoleChromium is the browser: Debian's chromium (make test installs it).
func consoleChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: make test installs it (apt-get install chromium)")
	return ""
}

// consoleBrowser starts headless Chromium in a fresh profile, on a closed network: no
// sandbox (root in CI), no GPU, no QUIC, no first-run or background traffic. It trusts
// the cluster's certificates by ignoring certificate errors (the test's own CA).
func consoleBrowser(t *testing.T, path string) context.Context {
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.Flag("ignore-certificate-errors", true),
		chromedp.WindowSize(1440, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// consoleProxy serves target under prefix, stripping it, over HTTPS: as an operator's
// reverse proxy would. It keeps the paths of the API requests it passes on.
type consoleProxy struct {
	URL  string
	mu   sync.Mutex
	seen []string
}

func newConsoleProxy(t *testing.T, target string, roots *tls.Config, prefix string) *consoleProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{TLSClientConfig: roots}
	p := &consoleProxy{}
	srv := httptest.NewTLSServer(http.StripPrefix(prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			p.mu.Lock()
			p.seen = append(p.seen, r.URL.Path)
			p.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	})))
	t.Cleanup(srv.Close)
	p.URL = srv.URL + prefix + "/"
	return p
}

// requests are the API paths requested since the last call.
func (p *consoleProxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.seen
	p.seen = nil
	return out
}

// consoleRun runs actions within a deadline, failing the test with what was being done.
func consoleRun(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(cctx, actions...); err != nil {
		t.Fatalf("%s: %v\npage:\n%s", what, err, consolePage(ctx))
	}
}

// consolePage is the page's text, for failures.
func consolePage(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	return page
}

// consoleWait waits until the page's expression js is true.
func consoleWait(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	err, ok := await.Within(45*time.Second, 200*time.Millisecond, func() (error, bool) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+js+")"))
		return err, err == nil && ok
	})
	if !ok {
		t.Fatalf("waiting for %s (%s): %v\npage:\n%s", what, js, err, consolePage(ctx))
	}
}

// consoleJSON evaluates js in the page and decodes its (JSON-able) value into v.
func consoleJSON(t *testing.T, ctx context.Context, js string, v any) {
	t.Helper()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string]("JSON.stringify("+js+")"))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatalf("%s: %v (%s)", js, err, raw)
	}
}

// consoleShot writes a screenshot of the page to .tmp/console/name.png for review.
func consoleShot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join(cluster.RepoRoot(), ".tmp", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// consoleSignIn signs in with a client id and secret through the page's form.
func consoleSignIn(t *testing.T, ctx context.Context, base, id, secret string) {
	t.Helper()
	consoleRun(t, ctx, "sign in as "+id,
		chromedp.Navigate(base+"#cluster"),
		chromedp.WaitVisible(chromedp.CSS("#signin-form")),
		chromedp.SetValue(chromedp.CSS(`#signin-form input[name="client_id"]`), id),
		chromedp.SetValue(chromedp.CSS(`#signin-form input[name="client_secret"]`), secret),
		chromedp.Click(chromedp.CSS(`#signin-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#nav")))
	consoleWait(t, ctx, "signed in as "+id, `document.getElementById("who").textContent.startsWith(`+strconv.Quote(id+" ")+`)`)
}

// consoleGo shows a view and waits until it has drawn what sel finds.
func consoleGo(t *testing.T, ctx context.Context, hash, sel string) {
	t.Helper()
	consoleRun(t, ctx, "show "+hash, chromedp.Evaluate[chromedp.Void](`location.hash = `+strconv.Quote(hash)))
	consoleWait(t, ctx, hash+" drawn", `document.querySelector(`+strconv.Quote(sel)+`)`)
}

type consoleToken string

func (c consoleToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(c)}, nil
}
func (consoleToken) RequireTransportSecurity() bool { return true }

// TestConsole: one cluster (auth and TLS on) and one browser for every view. Signed in
// as the admin through a proxy's path prefix, the cluster view lists every node; the
// tables and table views show DescribeTable's numbers; the rows view shows the records
// produced, as minkctl scan renders them; the file servers and charts views draw from
// each node's own figures; draining an indexer from the page moves its leases to the
// other; the create form shows the API's own error. Signed in as the reader, the page
// has no admin controls, and a forged drain (no CSRF token, the admin's stolen one) is
// refused. A screenshot of each view is left in .tmp/console.
func TestConsole(t *testing.T) {
	chromium := consoleChromium(t)
	c := cluster.New(t, cluster.LeaseTTL(1500*time.Millisecond), cluster.WithAuth())
	ca := tlsfilestest.NewCA(t, "mink console ca")
	start := func(role, id string, extra ...string) {
		files, _ := ca.Write(t, t.TempDir(), id, tlsfilestest.Loopback...)
		c.Start(role, id, append([]string{"--tls-cert-file", files.Cert, "--tls-key-file", files.Key,
			"--tls-client-ca-file", files.ClientCAs}, extra...)...)
	}
	c.Kafka.CreateTopic("clicks", 2, nil)
	start(cluster.Indexer, "idx-1", "--console-addr", "127.0.0.1:0")
	start(cluster.Indexer, "idx-2")
	start(cluster.Writer, "wr-1")
	start(cluster.FileServer, "fs-1", "--console-addr", "127.0.0.1:0")
	roots := &tls.Config{RootCAs: ca.Pool()}
	conn, err := grpc.NewClient(c.Member("idx-1").Addr(), grpc.WithTransportCredentials(credentials.NewTLS(roots)),
		grpc.WithPerRPCCredentials(consoleToken(c.Auth.Admin.Secret)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	adm := adminv1.NewAdminServiceClient(conn)
	ctx := context.Background()
	for _, id := range []string{"idx-2", "wr-1", "fs-1"} {
		c.Member(id)
	}

	// A table of two partitions and 30 records, indexed and committed.
	_, err = adm.CreateTable(ctx, &adminv1.CreateTableRequest{Name: "clicks", Topic: "clicks", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON,
		Columns:    []*adminv1.Column{{Name: "id", Type: "long", Required: true}, {Name: "page", Type: "string"}},
		Properties: map[string]string{"mink.range.max-age": "200ms", "mink.commit.interval": "200ms"}})
	if err != nil {
		t.Fatal(err)
	}
	prod := c.Kafka.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produced := map[string]string{} // id -> page
	var recs []*kgo.Record
	for i := range 30 {
		page := fmt.Sprintf("/page/%d?q=<b>&x", i)
		produced[strconv.Itoa(i)] = page
		v, _ := json.Marshal(map[string]any{"id": i, "page": page})
		recs = append(recs, &kgo.Record{Topic: "clicks", Partition: int32(i % 2), Value: v})
	}
	kafkatest.Produce(t, prod, recs...)
	describe := func() *adminv1.DescribeTableResponse {
		t.Helper()
		d, err := adm.DescribeTable(ctx, &adminv1.DescribeTableRequest{Name: "clicks"})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	waitFor(t, 60*time.Second, "clicks indexed and committed", func() (string, bool) {
		d := describe()
		for _, p := range d.GetPartitions() {
			if p.GetLagRecords() != 0 || p.GetCommittedEndOffset() != p.GetHighWatermark() || p.GetHolder() == "" {
				return p.String(), false
			}
		}
		return "", len(d.GetPartitions()) == 2
	})

	consoleAddr := func(id string) string {
		st, err := adm.GetStatus(ctx, &adminv1.GetStatusRequest{Node: id})
		if err != nil || st.GetAddrs()["console"] == "" {
			t.Fatalf("%s's console address: %v %v", id, st.GetAddrs(), err)
		}
		return "https://" + st.GetAddrs()["console"] + "/"
	}
	proxy := newConsoleProxy(t, consoleAddr("idx-1"), roots, "/ops/mink")
	base := proxy.URL
	browser := consoleBrowser(t, chromium)

	t.Run("cluster", func(t *testing.T) {
		consoleSignIn(t, browser, base, c.Auth.Admin.ID, c.Auth.Admin.Secret)
		consoleGo(t, browser, "#cluster", `table.nodes tr[data-node="fs-1"]`)
		var nodes []string
		consoleJSON(t, browser, `[...document.querySelectorAll("table.nodes tbody tr")].map(r => r.dataset.node)`, &nodes)
		if want := []string{"fs-1", "idx-1", "idx-2", "wr-1"}; !slices.Equal(nodes, want) {
			t.Errorf("nodes on the page: %v, want %v", nodes, want)
		}
		consoleWait(t, browser, "drain buttons for the admin", `document.querySelectorAll('button[data-action="drain"]').length === 4`)
		consoleShot(t, browser, "cluster")
	})

	t.Run("tables", func(t *testing.T) {
		consoleGo(t, browser, "#tables", `tr[data-table="default.clicks"]`)
		var cells []string
		consoleJSON(t, browser, `[...document.querySelectorAll('tr[data-table="default.clicks"] td')].map(c => c.textContent)`, &cells)
		if len(cells) < 7 || cells[0] != "default.clicks" || cells[1] != "clicks" || cells[2] != "json" || cells[4] != "2" || cells[6] != "0" {
			t.Errorf("the table's row: %q", cells)
		}
		consoleShot(t, browser, "tables")
	})

	t.Run("table", func(t *testing.T) {
		consoleGo(t, browser, "#table/default.clicks", `table.partitions tbody tr[data-partition="1"]`)
		var rows [][]string
		consoleJSON(t, browser, `[...document.querySelectorAll("table.partitions tbody tr")].map(r => [...r.cells].map(c => c.textContent))`, &rows)
		d := describe()
		if len(rows) != len(d.GetPartitions()) {
			t.Fatalf("partition rows %v, DescribeTable %v", rows, d.GetPartitions())
		}
		for i, p := range d.GetPartitions() {
			want := map[int]int64{0: int64(p.GetPartition()), 1: p.GetIndexedEndOffset(), 2: p.GetHighWatermark(), 3: p.GetLagRecords(),
				5: p.GetRangeCount(), 8: p.GetCommittedFiles(), 9: p.GetCommittedEndOffset()}
			for col, w := range want {
				if got := strings.ReplaceAll(rows[i][col], ",", ""); got != strconv.FormatInt(w, 10) {
					t.Errorf("partition %d, column %d: the page says %q, DescribeTable %d", p.GetPartition(), col, rows[i][col], w)
				}
			}
			if !strings.HasPrefix(rows[i][7], p.GetHolder()+" (epoch "+strconv.FormatInt(p.GetEpoch(), 10)+")") {
				t.Errorf("partition %d's indexer: %q, DescribeTable %s epoch %d", p.GetPartition(), rows[i][7], p.GetHolder(), p.GetEpoch())
			}
		}
		var schema [][]string
		consoleJSON(t, browser, `[...document.querySelectorAll("table.schema tbody tr")].map(r => [...r.cells].map(c => c.textContent))`, &schema)
		if len(schema) != len(d.GetTable().GetSchema()) {
			t.Errorf("schema rows %v, DescribeTable %v", schema, d.GetTable().GetSchema())
		}
		var spec string
		consoleJSON(t, browser, `document.querySelector('dd[data-fact="Partitioned by"]').textContent`, &spec)
		if f := d.GetTable().GetPartitionSpec(); len(f) != 1 || spec != f[0].GetTransform()+"("+f[0].GetColumn()+")" {
			t.Errorf("the page's partition spec %q, DescribeTable %v", spec, f)
		}
		var snaps int
		consoleJSON(t, browser, `document.querySelectorAll("table.snapshots tbody tr").length`, &snaps)
		if snaps == 0 || snaps > 20 || len(d.GetSnapshots()) == 0 {
			t.Errorf("%d snapshot rows, DescribeTable %d snapshots", snaps, len(d.GetSnapshots()))
		}
		consoleShot(t, browser, "table")
	})

	t.Run("rows", func(t *testing.T) {
		consoleGo(t, browser, "#rows/default.clicks", `table.rows tbody tr`)
		var head []string
		consoleJSON(t, browser, `[...document.querySelectorAll("table.rows thead th")].map(h => h.firstChild.textContent + ":" + h.querySelector(".type").textContent)`, &head)
		idCol, pageCol := slices.Index(head, "id:long"), slices.Index(head, "page:string")
		if idCol < 0 || pageCol < 0 || !slices.Contains(head, "_kafka_offset:long") {
			t.Fatalf("columns with their types: %v", head)
		}
		var rows [][]string
		consoleJSON(t, browser, `[...document.querySelectorAll("table.rows tbody tr")].map(r => [...r.cells].map(c => c.textContent))`, &rows)
		got := map[string]string{}
		for _, r := range rows {
			got[r[idCol]] = r[pageCol]
		}
		if len(rows) != len(produced) || fmt.Sprint(got) != fmt.Sprint(produced) {
			t.Errorf("rows on the page (%d): %v\nproduced: %v", len(rows), got, produced)
		}
		consoleShot(t, browser, "rows")
	})

	t.Run("fileservers", func(t *testing.T) {
		consoleGo(t, browser, "#fileservers", `table.fileservers tr[data-node="fs-1"]`)
		var cells []string
		consoleJSON(t, browser, `[...document.querySelectorAll('table.fileservers tr[data-node="fs-1"] td')].map(c => c.textContent)`, &cells)
		if len(cells) < 10 || !strings.Contains(cells[1], "of 1.0 GiB") || !strings.HasPrefix(cells[9], "https://") {
			t.Errorf("fs-1's row: %q", cells)
		}
		consoleShot(t, browser, "fileservers")
	})

	t.Run("charts", func(t *testing.T) {
		consoleGo(t, browser, "#charts", `#chart-rate`)
		// Records produced and rows read while the nodes sample: the indexers' records per
		// second, and fs-1's table loads and S3 GETs (the rows view reads through its
		// catalog and S3) show on the charts, as rates between two samples.
		next := len(produced)
		deadline := time.Now().Add(60 * time.Second)
		for {
			var recs []*kgo.Record
			for range 20 {
				v, _ := json.Marshal(map[string]any{"id": next, "page": "/more"})
				recs = append(recs, &kgo.Record{Topic: "clicks", Partition: int32(next % 2), Value: v})
				next++
			}
			kafkatest.Produce(t, prod, recs...)
			chromedp.Run(browser, chromedp.Evaluate[[]byte](`fetch("api/rows?table=default.clicks&limit=5").then(r => r.json())`, chromedp.EvalAwaitPromise))
			var drawn map[string]bool
			consoleJSON(t, browser, `Object.fromEntries(["rate", "table_loads", "s3_gets"].map(k => [k, !!charts[k] && charts[k].data.slice(1).some(s => s.some(v => v > 0))]))`, &drawn)
			if drawn["rate"] && drawn["table_loads"] && drawn["s3_gets"] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("charts with a value above 0: %v\npage:\n%s", drawn, consolePage(browser))
			}
			time.Sleep(time.Second) // records arrive over time, as the nodes sample
		}
		consoleWait(t, browser, "the four charts drawn", `document.querySelectorAll(".card .uplot").length === 4`)
		consoleShot(t, browser, "charts")
	})

	t.Run("a node that stopped renewing", func(t *testing.T) {
		// Paused, wr-1 stops renewing: the cluster view marks it once it trails the
		// others' renewals by half a lease_ttl, until its membership expires. The view is
		// redrawn as fast as it goes, to fall in that window; a miss is tried again.
		for attempt := 0; ; attempt++ {
			c.Node("wr-1").Pause()
			seen := false
			for i := 0; i < 40 && !seen; i++ {
				consoleRun(t, browser, "redraw the cluster", chromedp.Evaluate[chromedp.Void](`location.hash = "#cluster/`+strconv.Itoa(i)+`"`))
				time.Sleep(50 * time.Millisecond) // the redraw's two calls
				seen, _ = chromedp.Run(browser, chromedp.Evaluate[bool](`!!document.querySelector('tr.stale[data-node="wr-1"]')`))
			}
			if seen {
				consoleShot(t, browser, "stale")
			}
			c.Node("wr-1").Resume()
			c.Member("wr-1")
			if seen {
				break
			}
			if attempt == 4 {
				t.Fatalf("wr-1, paused, was never shown as not renewing:\n%s", consolePage(browser))
			}
		}
	})

	t.Run("drain", func(t *testing.T) {
		consoleGo(t, browser, "#cluster", `tr[data-node="idx-2"] button[data-action="drain"]`)
		consoleRun(t, browser, "drain idx-2", chromedp.Click(chromedp.CSS(`tr[data-node="idx-2"] button[data-action="drain"]`)))
		waitFor(t, 30*time.Second, "idx-2's partitions to move to idx-1", func() (string, bool) {
			ls, err := adm.ListLeases(ctx, &adminv1.ListLeasesRequest{})
			if err != nil {
				return err.Error(), false
			}
			held := map[string]int{}
			for _, l := range ls.GetLeases() {
				if l.GetKind() == adminv1.LeaseKind_LEASE_KIND_PARTITION {
					held[l.GetHolder()]++
				}
			}
			return fmt.Sprint(held), held["idx-1"] == 2 && held["idx-2"] == 0
		})
		consoleWait(t, browser, "idx-2 shown draining", `document.querySelector('tr[data-node="idx-2"] button[data-action="undrain"]')`)
		consoleShot(t, browser, "drained")
		consoleRun(t, browser, "undrain idx-2", chromedp.Click(chromedp.CSS(`tr[data-node="idx-2"] button[data-action="undrain"]`)))
		consoleWait(t, browser, "idx-2 undrained", `document.querySelector('tr[data-node="idx-2"] button[data-action="drain"]')`)
	})

	t.Run("create form shows the API's error", func(t *testing.T) {
		consoleGo(t, browser, "#tables", `form#create-table`)
		consoleRun(t, browser, "fill the create form",
			chromedp.SetValue(chromedp.CSS(`#create-table input[name="name"]`), "no such!"),
			chromedp.SetValue(chromedp.CSS(`#create-table input[name="topic"]`), "clicks"),
			chromedp.Click(chromedp.CSS(`#create-table button[type="submit"]`)))
		consoleWait(t, browser, "the form's error", `document.querySelector('[data-error="create-table"]').textContent !== ""`)
		var shown string
		consoleJSON(t, browser, `document.querySelector('[data-error="create-table"]').textContent`, &shown)
		_, err := adm.CreateTable(ctx, &adminv1.CreateTableRequest{Name: "no such!", Topic: "clicks", Format: adminv1.RecordFormat_RECORD_FORMAT_JSON})
		if want := status.Code(err).String() + ": " + status.Convert(err).Message(); shown != want {
			t.Errorf("the form shows %q; the API says %q", shown, want)
		}
		consoleShot(t, browser, "create-error")
		// Corrected, the same form creates the table.
		consoleRun(t, browser, "create made_here",
			chromedp.SetValue(chromedp.CSS(`#create-table input[name="name"]`), "made_here"),
			chromedp.SetValue(chromedp.CSS(`#create-table input[name="columns"]`), "id:long, page:string"),
			chromedp.Click(chromedp.CSS(`#create-table button[type="submit"]`)))
		consoleWait(t, browser, "made_here listed", `document.querySelector('tr[data-table="default.made_here"]')`)
		if d, err := adm.DescribeTable(ctx, &adminv1.DescribeTableRequest{Name: "made_here"}); err != nil || len(d.GetTable().GetColumns()) != 2 {
			t.Errorf("the table the form made: %v %v", d.GetTable(), err)
		}
	})

	t.Run("alter form", func(t *testing.T) {
		consoleGo(t, browser, "#table/default.clicks", `form#alter-table`)
		consoleRun(t, browser, "add a column",
			chromedp.SetValue(chromedp.CSS(`#alter-table input[name="add"]`), "note:string"),
			chromedp.Click(chromedp.CSS(`#alter-table button[type="submit"]`)))
		consoleWait(t, browser, "schema version 1 shown", `[...document.querySelectorAll("table.versions tbody tr")].some(r => r.textContent.includes("note string"))`)
		if d := describe(); d.GetTable().GetSchemaVersion() != 1 || len(d.GetSchemaVersions()) != 2 || d.GetSchemaVersions()[1].GetAdded()[0].GetName() != "note" {
			t.Errorf("after the alter form: schema version %d, versions %v", d.GetTable().GetSchemaVersion(), d.GetSchemaVersions())
		}
		// A change the API refuses (the column exists) comes back as it said it.
		consoleRun(t, browser, "add the column again",
			chromedp.SetValue(chromedp.CSS(`#alter-table input[name="add"]`), "note:string"),
			chromedp.Click(chromedp.CSS(`#alter-table button[type="submit"]`)))
		consoleWait(t, browser, "the alter form's error", `document.querySelector('[data-error="alter-table"]').textContent.startsWith("InvalidArgument: ")`)
	})

	t.Run("reader", func(t *testing.T) {
		var adminCSRF string
		consoleJSON(t, browser, `session.csrf`, &adminCSRF)
		consoleRun(t, browser, "sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#signin-form")))
		consoleSignIn(t, browser, base, c.Auth.Reader.ID, c.Auth.Reader.Secret)
		consoleGo(t, browser, "#cluster", `table.nodes tr[data-node="idx-2"]`)
		consoleGo(t, browser, "#tables", `tr[data-table="default.clicks"]`)
		var controls int
		consoleJSON(t, browser, `document.querySelectorAll("button[data-action], form#create-table, form#alter-table").length`, &controls)
		consoleGo(t, browser, "#table/default.clicks", `table.partitions`)
		var more int
		consoleJSON(t, browser, `document.querySelectorAll("button[data-action], form#create-table, form#alter-table").length`, &more)
		if controls+more != 0 {
			t.Errorf("the reader's page has %d admin controls", controls+more)
		}
		consoleShot(t, browser, "reader")
		// Forged drains from the reader's page: no CSRF token, the admin's (stolen), and
		// its own (the door refuses the reader).
		forge := func(token string) (res struct {
			Status int
			Code   string
		}) {
			js := `fetch("api/call/DrainNode", {method: "POST", headers: {"Content-Type": "application/json", "X-CSRF-Token": ` + strconv.Quote(token) +
				`}, body: JSON.stringify({node: "idx-1"})}).then(async r => ({Status: r.status, Code: (await r.json()).code}))`
			out, err := chromedp.Run(browser, chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
			if err != nil || json.Unmarshal(out, &res) != nil {
				t.Fatalf("forge a drain: %v %s", err, out)
			}
			return res
		}
		var own string
		consoleJSON(t, browser, `session.csrf`, &own)
		for name, tok := range map[string]string{"no": "", "the admin's stolen": adminCSRF, "its own": own} {
			if res := forge(tok); res.Status != http.StatusForbidden || res.Code != "PermissionDenied" {
				t.Errorf("a drain with %s CSRF token as the reader: %+v, want 403 PermissionDenied", name, res)
			}
		}
		st, err := adm.GetStatus(ctx, &adminv1.GetStatusRequest{Node: "idx-1"})
		if err != nil || st.GetDraining() {
			t.Errorf("idx-1 after the forged drains: draining %v, %v", st.GetDraining(), err)
		}
	})

	t.Run("many tables", func(t *testing.T) {
		// 120 more tables (122 in all): the tables view pages them 50 at a time, and each refresh is
		// one request whatever the number of tables.
		for i := range 120 {
			if _, err := adm.CreateTable(ctx, &adminv1.CreateTableRequest{Name: fmt.Sprintf("t%03d", i), Topic: "clicks",
				Format: adminv1.RecordFormat_RECORD_FORMAT_RAW}); err != nil {
				t.Fatal(err)
			}
		}
		consoleGo(t, browser, "#tables", `tr[data-table="default.t047"]`)
		pageOf := func() []string {
			var names []string
			consoleJSON(t, browser, `[...document.querySelectorAll("table.tables tbody tr")].map(r => r.dataset.table)`, &names)
			return names
		}
		var all []string
		for page := 0; ; page++ {
			names := pageOf()
			all = append(all, names...)
			var more bool
			consoleJSON(t, browser, `![...document.querySelectorAll(".pager button")].find(b => b.textContent.startsWith("Next")).disabled`, &more)
			if !more {
				break
			}
			if len(names) != 50 {
				t.Fatalf("page %d has %d tables, want 50", page+1, len(names))
			}
			last := names[len(names)-1]
			consoleRun(t, browser, "next page", chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll(".pager button")].find(b => b.textContent.startsWith("Next")).click()`))
			consoleWait(t, browser, "the next page", `document.querySelector("table.tables tbody tr") && document.querySelector("table.tables tbody tr").dataset.table > `+strconv.Quote(last))
		}
		if len(all) != 122 || !slices.IsSorted(all) {
			t.Errorf("the pages listed %d tables (sorted: %v), want 122", len(all), slices.IsSorted(all))
		}
		proxy.requests()
		consoleWait(t, browser, "two refreshes", `document.getElementById("updated").textContent !== ""`)
		time.Sleep(2 * time.Duration(consoleRefresh) * time.Second) // what the page asks for over two refreshes
		reqs := proxy.requests()
		for _, r := range reqs {
			if r != "/api/call/ListTables" {
				t.Errorf("the tables view asked for %s", r)
			}
		}
		if len(reqs) < 1 || len(reqs) > 3 {
			t.Errorf("the tables view made %d requests in two refreshes: %v", len(reqs), reqs)
		}
	})
}

// consoleRefresh is how often, in seconds, the page refreshes its view.
const consoleRefresh = 5
