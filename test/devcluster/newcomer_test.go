package devcluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/minkhq/mink/pkg/await"
	"github.com/minkhq/mink/pkg/devcluster"
	"github.com/minkhq/mink/pkg/roleproc"
	"github.com/minkhq/mink/test/cluster"
)

// TestNewcomerPath walks a newcomer's first hour with the commands exactly as the README
// and the banner print them (read out of both, not retyped here): two clusters side by
// side on the ports of the README's DEV_FLAGS line; on the first, the banner's commands,
// the README's ten-minute tour (a topic of one's own made with minkctl, filled by kcat or
// a plain producer, a table of it, scan, its Go program reading it with iceberg-go,
// alter, drain and the leases moving); a topic the embedded broker makes on first
// produce; scan finding the catalog through --addr alone; connect.md's curl and aws-cli
// lines; docs/engines.md's and connect.md's Spark settings agreeing; and each role log
// line naming its node once.
func TestNewcomerPath(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two whole clusters")
	}
	readme, err := os.ReadFile(filepath.Join(cluster.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}

	// The README's second cluster: every port flag of the launcher is in its DEV_FLAGS,
	// and every flag there is the launcher's.
	devFlags := readmeDevFlags(t, string(readme))
	help, err := exec.Command(cluster.Bin("minkdev"), "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("minkdev --help: %v: %s", err, help)
	}
	var portFlags []string
	for _, m := range regexp.MustCompile(`(?m)^\s+-(\S+-port) int`).FindAllStringSubmatch(string(help), -1) {
		portFlags = append(portFlags, m[1])
	}
	if len(portFlags) < 7 {
		t.Fatalf("minkdev --help lists the port flags %v; want at least 7:\n%s", portFlags, help)
	}
	for _, f := range portFlags {
		if _, ok := devFlags[f]; !ok {
			t.Errorf("step: ports: the README's second cluster leaves --%s at its default: it collides with the first", f)
		}
	}
	for f := range devFlags {
		if !strings.Contains(string(help), "\n  -"+f+" ") {
			t.Errorf("step: ports: the README's DEV_FLAGS has --%s, which minkdev does not take", f)
		}
	}

	// Both clusters at once, each on ports of its own: the README's flags, each flag
	// given a free port (the README's own values may be taken by whatever else runs here).
	var clusters [2]*newcomerCluster
	used := -1000
	for i := range clusters {
		dir := tempDir(t)
		const block = 5 * 9 // five nodes after each of the port flags' first ports
		base := freePortBlock(t, block)
		for base < used+block && base+block > used {
			base = freePortBlock(t, block)
		}
		used = base
		args := []string{"--bin-dir", cluster.BinDir()}
		n := 0
		for _, f := range slices.Sorted(maps.Keys(devFlags)) {
			v := devFlags[f]
			switch {
			case f == "dir":
				v = filepath.Join(dir, filepath.Base(v))
			case strings.HasSuffix(f, "-port"):
				v, n = strconv.Itoa(base+n), n+5
			}
			args = append(args, "--"+f, v)
		}
		args = append(args, "--lease-ttl", "2s", "--shutdown-timeout", "5s", "--ready-timeout", "40s",
			"--demo-rate", "50", "--demo-events", "50", "--range-max-age", "1s", "--commit-interval", "1s")
		clusters[i] = &newcomerCluster{m: startMinkdev(t, args)}
	}
	for _, c := range clusters {
		c.info = c.m.waitReady(t)
		c.env = bannerEnv(t, c.m.Output())
	}
	a, b := clusters[0], clusters[1]
	if a.env["MINK_ADDR"] == b.env["MINK_ADDR"] || a.env["MINK_CATALOG"] == b.env["MINK_CATALOG"] {
		t.Fatalf("step: ports: both banners export the same addresses: %v and %v", a.env, b.env)
	}
	if want := devcluster.Addr(a.info.Processes[0].GRPCPort); a.env["MINK_ADDR"] != want || a.env["MINK_CATALOG"] != a.info.CatalogURL {
		t.Errorf("step: banner: the export line says %v; want MINK_ADDR=%s MINK_CATALOG=%s", a.env, want, a.info.CatalogURL)
	}

	// The banner's commands, on each cluster, as printed.
	for _, c := range clusters {
		c.bannerCommands(t)
	}

	// The README's ten-minute tour, on the first; the banner's tour is its first commands.
	tour := readmeTour(t, string(readme))
	var readmeTour, commands []string
	for _, l := range tour.lines {
		l = strings.ReplaceAll(l, ".tmp/bin/minkctl", rel(cluster.Bin("minkctl")))
		l = strings.ReplaceAll(l, "127.0.0.1:9092", strings.Join(a.info.KafkaBrokers, ","))
		readmeTour = append(readmeTour, l)
		if !strings.HasPrefix(l, "export ") {
			commands = append(commands, l)
		}
	}
	for i, l := range section(a.m.Output(), "Your own topic") {
		if i >= len(commands) || command(l) != command(commands[i]) {
			t.Errorf("step: tour: the banner's line %q is not the README's %d-th: %q", l, i+1, commands)
		}
	}
	a.tour(t, readmeTour, tour)
	a.autoCreate(t)
	a.findCatalog(t)
	a.connectSnippets(t)
	a.oneNodePerLine(t)

	for _, c := range clusters {
		c.m.stop(t)
		checkNothingLeft(t, c.m.dir, c.info)
	}
}

// newcomerCluster is one make dev cluster, with the environment its banner exports.
type newcomerCluster struct {
	m    *minkdev
	info devcluster.RunInfo
	env  map[string]string // MINK_ADDR, MINK_CATALOG, MINK_TOKEN
}

// run runs one printed command line with the banner's environment through sh, as a
// shell would, and returns its output; grpcurl is this machine's.
func (c *newcomerCluster) run(t *testing.T, line string) (string, error) {
	t.Helper()
	if strings.HasPrefix(line, "grpcurl ") {
		g := cluster.Tool("grpcurl")
		if g == "" {
			t.Skip("grpcurl not found in .tmp/bin or PATH: run 'make tools'")
		}
		line = g + strings.TrimPrefix(line, "grpcurl")
	}
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = roleproc.CleanEnv()
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs line and fails the test when it fails.
func (c *newcomerCluster) must(t *testing.T, step, line string) string {
	t.Helper()
	out, err := c.run(t, line)
	if err != nil {
		t.Fatalf("step: %s: %s: %v\n%s", step, line, err, out)
	}
	return out
}

// bannerCommands runs every command under the banner's "Try": each succeeds, the grpcurl
// calls show zero values (-emit-defaults), and the scans print rows.
func (c *newcomerCluster) bannerCommands(t *testing.T) {
	t.Helper()
	lines := section(c.m.Output(), "Try")
	if len(lines) < 8 || !strings.HasPrefix(lines[0], "export MINK_ADDR=") {
		t.Fatalf("step: banner: the commands to try are %q", lines)
	}
	for _, l := range lines[1:] {
		out := c.must(t, "banner", l)
		switch {
		case strings.Contains(l, "/DescribeTable"):
			if !strings.Contains(out, `"partition": 0`) {
				t.Errorf("step: banner: %s does not show partition 0 (-emit-defaults):\n%s", l, out)
			}
		case strings.Contains(l, "/GetStatus"):
			if !strings.Contains(out, `"draining": false`) {
				t.Errorf("step: banner: %s does not show draining false (-emit-defaults):\n%s", l, out)
			}
		case strings.Contains(l, " status"):
			if !strings.Contains(out, c.info.Processes[0].ID) {
				t.Errorf("step: banner: %s is not %s's status:\n%s", l, c.info.Processes[0].ID, out)
			}
		case strings.Contains(l, " table describe "):
			if !regexp.MustCompile(`SCHEMA +table version \d+ \(Iceberg schema id \d+\)`).MatchString(out) {
				t.Errorf("step: banner: %s does not name the table's schema version apart:\n%s", l, out)
			}
		}
	}
}

// tour runs the README's ten-minute tour on the cluster, each line as printed, checking
// what each did: a topic of one's own and records in it, a table of it and a scan, the
// Go program reading it with iceberg-go, an alter and a record that fills the new column,
// an indexer drained and its leases moving to the other. Every step must be there.
func (c *newcomerCluster) tour(t *testing.T, lines []string, tour tourSection) {
	t.Helper()
	const topic = devcluster.TourTopic
	var (
		scanLine  string
		words     []string // every key and string value produced: a scan shows them all
		users     []string // the records produced, by "user"
		drained   string   // the node the tour drains, from its drain line
		before    map[int]tourLease
		seen      = map[string]bool{}
		partCount = 0
	)
	for _, l := range lines {
		if f := strings.Fields(command(l)); len(f) >= 2 && f[len(f)-2] == "drain" {
			drained = f[len(f)-1]
		}
	}
	for _, l := range lines {
		switch cmd := command(l); {
		case strings.HasPrefix(cmd, "export ") && strings.Contains(cmd, "MINK_ADDR="):
			// The banner's line, which the test has run already: the same variables.
			var names []string
			for _, m := range exportedName.FindAllStringSubmatch(cmd, -1) {
				names = append(names, m[1])
			}
			if !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(maps.Keys(c.env))) {
				t.Errorf("step: tour: the README's %q sets %v; the banner's export line %v", l, names, slices.Sorted(maps.Keys(c.env)))
			}
			seen["export"] = true
		case strings.HasPrefix(cmd, "export "):
			c.export(t, strings.ReplaceAll(l, ".tmp/dev/auth.json", c.info.AuthConfig))
		case strings.Contains(cmd, " topic create "):
			m := regexp.MustCompile(` topic create ` + topic + ` --partitions (\d+)$`).FindStringSubmatch(cmd)
			if m == nil {
				t.Fatalf("step: tour: %q does not make the topic %s with --partitions N", l, topic)
			}
			partCount, _ = strconv.Atoi(m[1])
			if out := c.must(t, "tour", l); !strings.Contains(out, fmt.Sprintf("created topic %s (%d partitions)", topic, partCount)) {
				t.Errorf("step: tour: %s printed:\n%s", l, out)
			}
			// The table's error before it exists and for a type of another system.
			other := strings.Replace(cmd, " topic create "+topic+" --partitions "+m[1], " table create ghost --column id:integer", 1)
			out, err := c.run(t, other)
			if err == nil || !strings.Contains(out, `unknown type "integer" (did you mean int or long?)`) {
				t.Errorf("step: tour: a column of type integer: %v:\n%s", err, out)
			}
			out, err = c.run(t, strings.Replace(other, "id:integer", "id:int", 1))
			if err == nil || !strings.Contains(out, "minkctl topic create ghost --partitions N") || !strings.Contains(out, "on first produce") {
				t.Errorf("step: tour: a table of a topic that does not exist: %v:\n%s", err, out)
			}
			seen["topic"] = true
		case strings.Contains(cmd, "kcat -P"):
			for _, rec := range c.produce(t, l) {
				var v map[string]any
				if err := json.Unmarshal([]byte(rec), &v); err != nil {
					t.Fatalf("step: tour: %q produces %s, not a JSON object: %v", l, rec, err)
				}
				for k, x := range v {
					words = append(words, k)
					if s, ok := x.(string); ok {
						words = append(words, s)
					}
				}
				users = append(users, fmt.Sprint(v["user"]))
			}
			seen["produce"] = true
		case strings.Contains(cmd, " table create "):
			c.must(t, "tour", l)
			seen["table"] = true
		case strings.Contains(cmd, " scan "):
			scanLine = l
			c.waitRows(t, l, words...)
			seen["scan"] = true
		case strings.HasPrefix(cmd, "go run "):
			c.goRun(t, l, tour, users)
			seen["engine"] = true
		case strings.Contains(cmd, " table alter "):
			c.must(t, "tour", l)
			seen["alter"] = true
		case strings.Contains(cmd, " table describe "):
			if out := c.must(t, "tour", l); !regexp.MustCompile(`SCHEMA +table version 1 \(Iceberg schema id \d+\)`).MatchString(out) {
				t.Errorf("step: tour: after the alter, %s says:\n%s", l, out)
			}
			seen["describe"] = true
		case strings.Contains(cmd, " leases"):
			if !seen["drain"] {
				// Both indexers hold the table's partitions, the one the tour drains too.
				before = c.waitLeases(t, l, partCount, func(ls map[int]tourLease) bool {
					for _, x := range ls {
						if x.holder == drained {
							return true
						}
					}
					return false
				})
				continue
			}
			after := c.waitLeases(t, l, partCount, func(ls map[int]tourLease) bool {
				for _, x := range ls {
					if x.holder == drained {
						return false
					}
				}
				return true
			})
			for p, b := range before {
				if b.holder == drained && after[p].epoch <= b.epoch {
					t.Errorf("step: tour: partition %d moved from %s to %s under epoch %d, not a newer one than %d", p, drained, after[p].holder, after[p].epoch, b.epoch)
				}
			}
			// Still indexed, by the others.
			c.produceRecords(t, topic, `{"user":"dee","ms":7}`)
			c.waitRows(t, scanLine, "dee")
			seen["moved"] = true
		case strings.Contains(cmd, " drain "):
			if before == nil {
				t.Errorf("step: tour: %q comes before any minkctl leases line: the tour shows no lease moving", l)
			}
			c.must(t, "tour", l)
			seen["drain"] = true
		case strings.Contains(cmd, " undrain "):
			c.must(t, "tour", l)
			seen["undrain"] = true
		default:
			t.Errorf("step: tour: the README's line %q is not one this test knows how to check", l)
		}
	}
	for _, step := range []string{"export", "topic", "produce", "table", "scan", "engine", "alter", "describe", "drain", "moved", "undrain"} {
		if !seen[step] {
			t.Errorf("step: tour: the README's tour has no %s step: %q", step, lines)
		}
	}
}

// exportedName finds the variables an export line sets (a value may be a <placeholder>
// with spaces, or a $(command)).
var exportedName = regexp.MustCompile(`(?:^export|\s)([A-Z_][A-Z0-9_]*)=`)

// export runs an export line of the tour, a variable made by a command, and keeps the
// variables it sets for the lines after it.
func (c *newcomerCluster) export(t *testing.T, line string) {
	t.Helper()
	for _, m := range exportedName.FindAllStringSubmatch(command(line), -1) {
		v := c.must(t, "tour", command(line)+` && printf %s "$`+m[1]+`"`)
		if v == "" {
			t.Fatalf("step: tour: %q sets %s to nothing", line, m[1])
		}
		c.env[m[1]] = v
	}
}

// goRun saves the tour's Go program where its go run line says, in a folder of its own
// rather than the checkout's .tmp, and runs it from the checkout, as the README says:
// iceberg-go reads the table through the catalog and S3, and prints every user produced.
func (c *newcomerCluster) goRun(t *testing.T, line string, tour tourSection, users []string) {
	t.Helper()
	m := regexp.MustCompile(`^go run (\S+\.go)$`).FindStringSubmatch(command(line))
	if m == nil || tour.program == "" {
		t.Fatalf("step: engine: %q runs no Go file, or the tour has no Go program", line)
	}
	if !strings.Contains(tour.text, "Save this as `"+m[1]+"`") {
		t.Errorf("step: engine: the tour does not say to save its program as %s", m[1])
	}
	path := filepath.Join(t.TempDir(), filepath.Base(m[1]))
	if err := os.WriteFile(path, []byte(tour.program), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", strings.Replace(command(line), m[1], path, 1))
	cmd.Dir = cluster.RepoRoot()
	cmd.Env = roleproc.CleanEnv()
	for k, v := range c.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("step: engine: %s: %v\n%s%s", line, err, out.String(), errOut.String())
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var row struct{ User string }
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("step: engine: %s printed %q, not a JSON row: %v\n%s", line, l, err, out.String())
		}
		got = append(got, row.User)
	}
	slices.Sort(got)
	if !slices.Equal(got, slices.Sorted(slices.Values(users))) {
		t.Errorf("step: engine: %s read the users %v; Kafka has %v:\n%s", line, got, users, out.String())
	}
}

// tourLease is a partition's holder and epoch, as minkctl leases prints them.
type tourLease struct {
	holder string
	epoch  int
}

// waitLeases runs a leases line until every one of the table's n partitions is held and
// ok holds of them.
func (c *newcomerCluster) waitLeases(t *testing.T, line string, n int, ok func(map[int]tourLease) bool) map[int]tourLease {
	t.Helper()
	var ls map[int]tourLease
	await.Every(t, scanTimeout, 500*time.Millisecond, "step: tour: "+line, func() (string, bool) {
		out, err := c.run(t, line)
		ls = map[int]tourLease{}
		for _, l := range strings.Split(out, "\n") {
			// TABLE_ID TABLE KIND PARTITION HOLDER EPOCH EXPIRES
			f := strings.Fields(l)
			if len(f) < 6 || f[1] != "default."+devcluster.TourTopic || f[2] != "partition" || f[4] == "-" {
				continue
			}
			p, _ := strconv.Atoi(f[3])
			e, _ := strconv.Atoi(f[5])
			ls[p] = tourLease{f[4], e}
		}
		return fmt.Sprintf("%v (%v):\n%s", ls, err, out), err == nil && len(ls) == n && ok(ls)
	})
	return ls
}

// produce runs the README's kcat line when kcat is here, else sends the same records
// with a plain producer (franz-go, creating topics as kcat does); it returns the records.
func (c *newcomerCluster) produce(t *testing.T, line string) []string {
	t.Helper()
	topic := regexp.MustCompile(`-t (\S+)`).FindStringSubmatch(line)
	var recs []string
	for _, m := range regexp.MustCompile(`'(\{[^']*\})'`).FindAllStringSubmatch(line, -1) {
		recs = append(recs, m[1])
	}
	if topic == nil || len(recs) == 0 {
		t.Fatalf("step: tour: no topic or records in %q", line)
	}
	if _, err := exec.LookPath("kcat"); err == nil {
		c.must(t, "tour", line)
		return recs
	}
	t.Logf("kcat is not installed: producing %v to %s with franz-go", recs, topic[1])
	c.produceRecords(t, topic[1], recs...)
	return recs
}

func (c *newcomerCluster) produceRecords(t *testing.T, topic string, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.info.KafkaBrokers...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaTimeout)
	defer cancel()
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("step: produce %s to %s: %v", v, topic, err)
		}
	}
}

// waitRows runs a scan line until its output holds every word of want.
func (c *newcomerCluster) waitRows(t *testing.T, line string, want ...string) {
	t.Helper()
	await.Every(t, scanTimeout, time.Second, fmt.Sprintf("step: tour: %s to show %q", line, want), func() (string, bool) {
		out, err := c.run(t, line)
		for _, w := range want {
			if !strings.Contains(out, w) {
				return fmt.Sprintf("no %q (%v):\n%s", w, err, out), false
			}
		}
		return fmt.Sprintf("%v:\n%s", err, out), err == nil
	})
}

// autoCreate: a plain producer to a topic nobody made makes it (one partition, as a
// default Kafka), and minkctl lists it.
func (c *newcomerCluster) autoCreate(t *testing.T) {
	t.Helper()
	c.produceRecords(t, "views", `{"page":"/"}`)
	out := c.must(t, "auto-create", rel(cluster.Bin("minkctl"))+" topic list")
	if !regexp.MustCompile(`(?m)^views +1 +-$`).MatchString(out) || !regexp.MustCompile(`(?m)^clicks +2 +default\.clicks$`).MatchString(out) {
		t.Errorf("step: auto-create: minkctl topic list:\n%s\nwant views (1 partition, no table) and clicks (2, default.clicks)", out)
	}
}

// findCatalog: with MINK_ADDR alone (an indexer), scan finds a file server's catalog.
func (c *newcomerCluster) findCatalog(t *testing.T) {
	t.Helper()
	cmd := exec.Command(cluster.Bin("minkctl"), "scan", "default."+devcluster.TourTopic, "--limit", "10", "--from", "start")
	cmd.Env = append(roleproc.CleanEnv(), "MINK_ADDR="+c.env["MINK_ADDR"], "MINK_TOKEN="+c.env["MINK_TOKEN"])
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "ann") {
		t.Errorf("step: scan without MINK_CATALOG: %v:\n%s", err, out)
	}
}

// connectSnippets runs connect.md's curl and aws-cli lines, and compares its Spark
// settings with docs/engines.md's, where the README's "Querying from an engine" lives.
func (c *newcomerCluster) connectSnippets(t *testing.T) {
	t.Helper()
	engines, err := os.ReadFile(filepath.Join(cluster.RepoRoot(), "docs", "engines.md"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(c.info.ConnectFile)
	if err != nil {
		t.Fatal(err)
	}
	connect := string(b)
	for _, fs := range c.info.Processes {
		if fs.Role == "fileserver" && !strings.Contains(connect, fmt.Sprintf("| %s | http://%s | http://%s |", fs.ID,
			devcluster.Addr(fs.CatalogPort), devcluster.Addr(fs.S3Port))) {
			t.Errorf("step: connect.md: file server %s is not named with its catalog and S3 addresses", fs.ID)
		}
	}

	// The token by curl, and a load with it: S3 keys only when asked for.
	if _, err := exec.LookPath("curl"); err == nil {
		out := c.must(t, "connect.md curl", strings.Join(readmeBlock(t, connect, "## curl"), "\n"))
		if !strings.Contains(out, `"storage-credentials"`) || !strings.Contains(out, `"s3.session-token"`) {
			t.Errorf("step: connect.md: the curl load with vended-credentials carries no S3 credentials:\n%s", out)
		}
		var tokenLine string
		for _, l := range readmeBlock(t, connect, "## curl") {
			if strings.HasPrefix(l, "TOKEN=") {
				tokenLine = l
			}
		}
		tok := c.must(t, "connect.md curl", tokenLine+` && printf %s "$TOKEN"`)
		req, _ := http.NewRequest("GET", c.info.CatalogURL+"/v1/namespaces/default/tables/"+strings.TrimPrefix(c.info.Table, "default."), nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || bytes.Contains(body, []byte("s3.session-token")) {
			t.Errorf("step: connect.md: a load with the curl token but no X-Iceberg-Access-Delegation: %d, S3 credentials in it: %v",
				resp.StatusCode, bytes.Contains(body, []byte("s3.session-token")))
		}
	} else {
		t.Log("curl is not installed: connect.md's curl lines are not run")
	}
	if _, err := exec.LookPath("aws"); err == nil {
		lines := readmeBlock(t, connect, "## aws-cli")
		var script []string
		for _, l := range lines {
			if !strings.HasPrefix(l, "#") {
				script = append(script, l)
			}
		}
		out := c.must(t, "connect.md aws-cli", strings.Join(script, "\n"))
		if !strings.Contains(out, "PRE data/") || !strings.Contains(out, ".parquet") {
			t.Errorf("step: connect.md: aws-cli listed:\n%s", out)
		}
	} else {
		t.Log("aws is not installed: connect.md's aws-cli lines are not run")
	}

	// Spark: the README and connect.md set the same catalog properties.
	confs := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if m := regexp.MustCompile(`--conf (spark\.sql\.catalog\.mink[^=]*)=`).FindStringSubmatch(l); m != nil {
				out = append(out, m[1])
			}
		}
		slices.Sort(out)
		return out
	}
	rs := confs(readmeBlock(t, string(engines), "### Spark"))
	cs := confs(readmeBlock(t, connect, "## Spark"))
	if !slices.Equal(rs, cs) || len(rs) < 8 {
		t.Errorf("step: Spark: docs/engines.md sets %v, connect.md %v", rs, cs)
	}
}

// oneNodePerLine: every JSON line of every role's log names its node once.
func (c *newcomerCluster) oneNodePerLine(t *testing.T) {
	t.Helper()
	for _, p := range c.info.Processes {
		f, err := os.Open(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		lines, bad := 0, ""
		for sc.Scan() {
			l := sc.Bytes()
			if len(l) == 0 || l[0] != '{' {
				continue
			}
			lines++
			if n := topLevelKeys(l, "node"); n != 1 && bad == "" {
				bad = fmt.Sprintf("%d times: %s", n, l)
			}
		}
		f.Close()
		if lines == 0 || bad != "" {
			t.Errorf("step: logs: %s: %d lines; \"node\" %s", p.ID, lines, bad)
		}
	}
}

// topLevelKeys counts key among the top-level keys of a JSON object.
func topLevelKeys(obj []byte, key string) int {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return -1
	}
	n := 0
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return -1
		}
		if k == key {
			n++
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return -1
		}
	}
	return n
}

// bannerEnv is what the banner's export line sets.
func bannerEnv(t *testing.T, out string) map[string]string {
	t.Helper()
	lines := section(out, "Try")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "export ") {
		t.Fatalf("step: banner: no export line under Try:\n%s", out)
	}
	env := map[string]string{}
	for _, kv := range strings.Fields(strings.TrimPrefix(command(lines[0]), "export ")) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// section is the indented lines after the banner line that starts with head.
func section(out, head string) []string {
	var lines []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, head):
			in = true
		case in && strings.HasPrefix(l, "  "):
			lines = append(lines, strings.TrimSpace(l))
		case in:
			return lines
		}
	}
	return lines
}

// readmeBlock is the lines of the first fenced block after the line head.
func readmeBlock(t *testing.T, doc, head string) []string {
	t.Helper()
	i := strings.Index(doc, "\n"+head)
	if i < 0 {
		t.Fatalf("no %q in the document", head)
	}
	return readmeBlockAfter(t, doc[i:], head)
}

func readmeBlockAfter(t *testing.T, doc, head string) []string {
	t.Helper()
	i := strings.Index(doc, head)
	if i < 0 {
		t.Fatalf("no %q in the document", head)
	}
	rest := doc[i:]
	start := strings.Index(rest, "```")
	if start < 0 {
		t.Fatalf("no code block after %q", head)
	}
	rest = rest[start:]
	rest = rest[strings.Index(rest, "\n")+1:]
	end := strings.Index(rest, "```")
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(rest[:end], "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// tourSection is the README's ten-minute tour: its text, its shell lines in order
// (every sh block's), and the Go program it saves (its go block).
type tourSection struct {
	text    string
	lines   []string
	program string
}

func readmeTour(t *testing.T, readme string) tourSection {
	t.Helper()
	const head = "\n## A ten-minute tour\n"
	i := strings.Index(readme, head)
	if i < 0 {
		t.Fatalf("the README has no %q section", strings.TrimSpace(head))
	}
	text := readme[i+len(head):]
	if j := strings.Index(text, "\n## "); j >= 0 {
		text = text[:j]
	}
	tour := tourSection{text: text}
	var lang string
	var block []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case !in && strings.HasPrefix(l, "```"):
			in, lang, block = true, strings.TrimPrefix(l, "```"), nil
		case in && strings.HasPrefix(l, "```"):
			in = false
			switch lang {
			case "sh":
				for _, b := range block {
					if strings.TrimSpace(b) != "" {
						tour.lines = append(tour.lines, b)
					}
				}
			case "go":
				if tour.program != "" {
					t.Fatal("the README's tour has two Go programs")
				}
				tour.program = strings.Join(block, "\n") + "\n"
			}
		case in:
			block = append(block, l)
		}
	}
	if len(tour.lines) == 0 {
		t.Fatal("the README's tour has no sh block")
	}
	return tour
}

// readmeDevFlags are the flags of the README's second cluster, by name.
func readmeDevFlags(t *testing.T, readme string) map[string]string {
	t.Helper()
	m := regexp.MustCompile(`make dev DEV_FLAGS='(--dir [^']*)'`).FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("the README shows no make dev DEV_FLAGS='--dir ...' line for a second cluster")
	}
	flags := map[string]string{}
	f := strings.Fields(m[1])
	for i := 0; i+1 < len(f); i += 2 {
		flags[strings.TrimPrefix(f[i], "--")] = f[i+1]
	}
	return flags
}

// command is a printed line without its trailing comment.
func command(l string) string {
	if i := strings.Index(l, "   #"); i >= 0 {
		l = l[:i]
	}
	return strings.TrimSpace(l)
}

// rel is p as the banner shows it: relative to this folder when inside it.
func rel(p string) string {
	wd, _ := os.Getwd()
	if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "minkdev-newcomer-") // not t.TempDir: Postgres may run as another user
	if err != nil {
		t.Fatal(err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
