package deploytest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/minkhq/mink/deploy/monitoring"
)

// The alerts the operators were promised (issue 16): lag growing, a partition without an
// indexer, a table without commits, file server 503s, Postgres unreachable.
var requiredAlerts = []string{"MinkIndexerLagGrowing", "MinkPartitionWithoutIndexer", "MinkTableNotCommitting",
	"MinkFileServer503s", "MinkPostgresUnreachable"}

// grafanaVariable is a $name or ${name} reference in a query.
var grafanaVariable = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

func TestDashboard(t *testing.T) {
	root := repoRoot(t)
	d, err := monitoring.LoadDashboard(root)
	if err != nil {
		t.Fatal(err)
	}
	f := monitoring.DashboardFile
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: uid %q, title %q: both are needed to import and link it", f, d.UID, d.Title)
	}
	vars := map[string]monitoring.Variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	ds, ok := vars["datasource"]
	if !ok || ds.Type != "datasource" || string(ds.Query) != `"prometheus"` {
		t.Fatalf("%s: templating: want a variable datasource of type datasource over prometheus, so the dashboard imports into any Grafana", f)
	}
	// Every panel and query reads the chosen data source, none a uid of one Grafana.
	wantDS := func(where string, d *monitoring.Datasource) {
		if d == nil || d.Type != "prometheus" || (d.UID != "${datasource}" && d.UID != "$datasource") {
			t.Errorf("%s: %s: datasource %+v; want {type: prometheus, uid: ${datasource}}", f, where, d)
		}
	}
	ids := map[int]string{}
	for _, p := range d.AllPanels() {
		where := fmt.Sprintf("panel %q", p.Title)
		if other, dup := ids[p.ID]; dup {
			t.Errorf("%s: %s: id %d is also panel %q's", f, where, p.ID, other)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W < 1 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H < 1 {
			t.Errorf("%s: %s: gridPos %+v is outside Grafana's 24 columns", f, where, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || p.Description == "" || len(p.Targets) == 0 {
			t.Errorf("%s: panel %d: want a title, a description that says what it shows, and a query", f, p.ID)
		}
		wantDS(where, p.Datasource)
		for _, tg := range p.Targets {
			wantDS(fmt.Sprintf("%s (%s)", where, tg.RefID), tg.Datasource)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			wantDS("variable "+v.Name, v.Datasource)
		}
	}
	for _, q := range d.Queries() {
		if _, err := q.Parse(); err != nil {
			t.Error(err)
		}
		for _, m := range grafanaVariable.FindAllStringSubmatch(q.Expr, -1) {
			if _, ok := vars[m[1]]; !ok && !strings.HasPrefix(m[1], "__") {
				t.Errorf("%s: $%s is no variable of the dashboard", q, m[1])
			}
		}
	}
}

// alertFuncs are Prometheus's template functions the annotations may use; only their
// names and arity matter here.
var alertFuncs = template.FuncMap{
	"humanize": fmt.Sprint, "humanize1024": fmt.Sprint, "humanizeDuration": fmt.Sprint,
	"humanizePercentage": fmt.Sprint, "humanizeTimestamp": fmt.Sprint, "title": strings.ToTitle,
	"toUpper": strings.ToUpper, "toLower": strings.ToLower, "stripPort": fmt.Sprint, "stripDomain": fmt.Sprint,
	"reReplaceAll": func(a, b, c string) string { return c }, "match": func(a, b string) bool { return true },
}

func TestAlertRules(t *testing.T) {
	root := repoRoot(t)
	rf, err := monitoring.LoadRules(root)
	if err != nil {
		t.Fatal(err)
	}
	f := monitoring.RulesFile
	if len(rf.Groups) == 0 {
		t.Fatalf("%s: no groups", f)
	}
	names, groups := map[string]bool{}, map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("%s: group %q: every group needs a name of its own", f, g.Name)
		}
		groups[g.Name] = true
		for _, r := range g.Rules {
			where := fmt.Sprintf("%s: alert %s", f, r.Name())
			if r.Alert == "" {
				t.Errorf("%s: group %s: a rule without alert (recording rules would need their own checks)", f, g.Name)
				continue
			}
			if names[r.Alert] {
				t.Errorf("%s: a second alert of that name", where)
			}
			names[r.Alert] = true
			e, err := (monitoring.Query{File: f, Where: "alert " + r.Alert, Expr: r.Expr}).Parse()
			if err != nil {
				t.Error(err)
				continue
			}
			if e.Type() != parser.ValueTypeVector {
				t.Errorf("%s: expr is a %s; an alert needs an instant vector", where, e.Type())
			}
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v (a blip must not page anyone)", where, r.For, err)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: labels.severity %q; want warning or critical", where, s)
			}
			labels, known := outputLabels(e)
			for _, a := range []string{"summary", "description", "runbook"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: annotations.%s is empty: an operator paged at night needs it", where, a)
					continue
				}
				checkAlertTemplate(t, where+": annotations."+a, r.Annotations[a], labels, known)
			}
		}
	}
	for _, a := range requiredAlerts {
		if !names[a] {
			t.Errorf("%s: no alert %s", f, a)
		}
	}
}

// checkAlertTemplate parses an annotation as Prometheus does and, when the labels of the
// alert's series are known, runs it over them: a $labels.x the expression drops is an
// error, not an empty word in a page.
func checkAlertTemplate(t *testing.T, where, text string, labels []string, known bool) {
	t.Helper()
	// Prometheus defines these before every annotation.
	const prefix = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	tmpl, err := template.New(where).Option("missingkey=error").Funcs(alertFuncs).Parse(prefix + text)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if !known {
		return
	}
	data := map[string]any{"Labels": map[string]string{}, "ExternalLabels": map[string]string{}, "ExternalURL": "", "Value": 0.5}
	for _, l := range labels {
		data["Labels"].(map[string]string)[l] = l
	}
	if err := tmpl.Execute(&strings.Builder{}, data); err != nil {
		t.Errorf("%s: %v (the alert's series have the labels %v)", where, err, labels)
	}
}

// outputLabels are the label names of an expression's result when the expression says
// (an aggregation by them, or what a set operation keeps of its left side), and known
// false when any label of the input may pass through.
func outputLabels(e parser.Expr) ([]string, bool) {
	switch e := e.(type) {
	case *parser.ParenExpr:
		return outputLabels(e.Expr)
	case *parser.AggregateExpr:
		switch e.Op {
		case parser.TOPK, parser.BOTTOMK, parser.LIMITK, parser.LIMIT_RATIO:
			return outputLabels(e.Expr)
		}
		if e.Without {
			return nil, false
		}
		return e.Grouping, true
	case *parser.BinaryExpr:
		l, r := e.LHS.Type() == parser.ValueTypeVector, e.RHS.Type() == parser.ValueTypeVector
		switch {
		case l && (!r || e.Op != parser.LOR):
			return outputLabels(e.LHS) // and, unless, comparisons, arithmetic one-to-one
		case r && !l:
			return outputLabels(e.RHS)
		}
		return nil, false
	case *parser.Call:
		for _, a := range e.Args {
			if a.Type() == parser.ValueTypeVector || a.Type() == parser.ValueTypeMatrix {
				return outputLabels(a)
			}
		}
		return nil, true
	case *parser.SubqueryExpr:
		return outputLabels(e.Expr)
	case *parser.NumberLiteral:
		return nil, true
	}
	return nil, false
}

// TestMonitoringCompose checks docker-compose.yaml's monitoring profile against the files
// it mounts: Prometheus reads prometheus.yml and the alerting rules, and scrapes every
// Mink node service on its metrics port; Grafana loads the dashboard and a data source
// that is that Prometheus.
func TestMonitoringCompose(t *testing.T) {
	root := repoRoot(t)
	f, _ := loadCompose(t, root)
	svc := func(name string) string { return fmt.Sprintf("%s: services.%s", composePath, name) }
	prom, graf := f.Services["prometheus"], f.Services["grafana"]
	if prom == nil || graf == nil {
		t.Fatalf("%s: services: want prometheus and grafana (the monitoring profile)", composePath)
	}
	for name, s := range map[string]*composeService{"prometheus": prom, "grafana": graf} {
		if !slices.Contains(s.Profiles, "monitoring") {
			t.Errorf("%s.profiles: %v; want monitoring, so a plain `docker compose up` starts neither", svc(name), s.Profiles)
		}
	}

	// Prometheus: its config, from the bind mount that holds it.
	configPath := "/etc/prometheus/prometheus.yml"
	for _, a := range prom.Command {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			configPath = v
		}
	}
	hostPath := func(s *composeService, where, inContainer string) string {
		t.Helper()
		for _, m := range s.Volumes {
			if m.Type == "bind" && under(inContainer, m.Target) {
				return filepath.Join(root, m.Source, strings.TrimPrefix(strings.TrimPrefix(inContainer, m.Target), "/"))
			}
		}
		t.Errorf("%s: %s is not bind-mounted from the repository", where, inContainer)
		return ""
	}
	cfgFile := hostPath(prom, svc("prometheus"), configPath)
	if cfgFile == "" {
		return
	}
	b, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			Authorization *struct {
				Type            string `yaml:"type"`
				CredentialsFile string `yaml:"credentials_file"`
			} `yaml:"authorization"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", cfgFile, err)
	}
	rel, _ := filepath.Rel(root, cfgFile)
	rulesLoaded := false
	for _, rf := range cfg.RuleFiles {
		if !path.IsAbs(rf) {
			rf = path.Join(path.Dir(configPath), rf)
		}
		if h := hostPath(prom, rel+": rule_files", rf); h != "" {
			if _, err := os.Stat(h); err != nil {
				t.Errorf("%s: rule_files: %s: %v", rel, rf, err)
			}
			rulesLoaded = rulesLoaded || h == filepath.Join(root, monitoring.RulesFile)
		}
	}
	if !rulesLoaded {
		t.Errorf("%s: rule_files does not load %s", rel, monitoring.RulesFile)
	}
	token := checkComposeMetricsToken(t, f)
	if token.service != "" && prom.DependsOn[token.service] != "service_completed_successfully" {
		t.Errorf("%s.depends_on.%s: want condition service_completed_successfully: Prometheus scrapes with the metrics token it writes", svc("prometheus"), token.service)
	}
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, sd := range sc.DNSSDConfigs {
			for _, name := range sd.Names {
				s := f.Services[name]
				if s == nil {
					t.Errorf("%s: job %s: %s is no service of %s", rel, sc.JobName, name, composePath)
					continue
				}
				scraped[name] = true
				// A node whose /metrics asks for a token is scraped with the same one.
				if want := s.Environment["MINK_METRICS_TOKEN_FILE"]; want != "" {
					switch {
					case token.in(s)[want] == "":
						t.Errorf("%s: %s reads its metrics token from %s, which is not the token file %s writes", rel, name, want, token.service)
					case sc.Authorization == nil || sc.Authorization.CredentialsFile == "" || (sc.Authorization.Type != "" && sc.Authorization.Type != "Bearer"):
						t.Errorf("%s: job %s: no authorization.credentials_file (type Bearer), but %s's /metrics asks for a token", rel, sc.JobName, name)
					case token.in(prom)[sc.Authorization.CredentialsFile] == "":
						t.Errorf("%s: job %s: credentials_file %s is not the metrics token %s writes, mounted into Prometheus", rel, sc.JobName, sc.Authorization.CredentialsFile, token.service)
					}
				}
				_, port, err := net.SplitHostPort(s.Environment["MINK_METRICS_ADDR"])
				if err != nil || port != fmt.Sprint(sd.Port) {
					t.Errorf("%s: job %s scrapes %s on port %d; it serves metrics on %q (MINK_METRICS_ADDR)", rel, sc.JobName, name, sd.Port, s.Environment["MINK_METRICS_ADDR"])
				}
			}
		}
	}
	for _, name := range sortedKeys(f.Services) {
		if p, ok := f.Services[name].program(); ok && p.role != "" && !scraped[name] {
			t.Errorf("%s: no job scrapes %s (a %s)", rel, name, p.binary)
		}
	}

	// Grafana: provisioning, the dashboard where its provider looks, and the data source.
	provDir := graf.Environment["GF_PATHS_PROVISIONING"]
	if provDir == "" {
		provDir = "/etc/grafana/provisioning"
	}
	prov := hostPath(graf, svc("grafana"), provDir)
	if prov == "" {
		return
	}
	dashFound := false
	provFiles, _ := filepath.Glob(filepath.Join(prov, "dashboards", "*.yaml"))
	for _, pf := range provFiles {
		var p struct {
			Providers []struct {
				Options struct {
					Path string `yaml:"path"`
				} `yaml:"options"`
			} `yaml:"providers"`
		}
		b, _ := os.ReadFile(pf)
		if err := yaml.Unmarshal(b, &p); err != nil {
			t.Errorf("%s: %v", pf, err)
		}
		for _, pr := range p.Providers {
			if h := hostPath(graf, pf, path.Join(pr.Options.Path, filepath.Base(monitoring.DashboardFile))); h == filepath.Join(root, monitoring.DashboardFile) {
				dashFound = true
			}
		}
	}
	if !dashFound {
		t.Errorf("%s: no dashboard provider under %s/dashboards loads %s", svc("grafana"), provDir, monitoring.DashboardFile)
	}
	dsFiles, _ := filepath.Glob(filepath.Join(prov, "datasources", "*.yaml"))
	dsFound := false
	for _, df := range dsFiles {
		var d struct {
			Datasources []struct {
				Type string `yaml:"type"`
				URL  string `yaml:"url"`
			} `yaml:"datasources"`
		}
		b, _ := os.ReadFile(df)
		if err := yaml.Unmarshal(b, &d); err != nil {
			t.Errorf("%s: %v", df, err)
		}
		for _, ds := range d.Datasources {
			u, err := url.Parse(ds.URL)
			if ds.Type == "prometheus" && err == nil && u.Hostname() == "prometheus" && u.Port() == "9090" {
				dsFound = true
			}
		}
	}
	if !dsFound {
		t.Errorf("%s: no data source of %s/datasources is the prometheus service (http://prometheus:9090)", svc("grafana"), provDir)
	}
	if graf.DependsOn["prometheus"] == "" {
		t.Errorf("%s.depends_on: want prometheus", svc("grafana"))
	}
}

// TestMonitoringKubernetes: every workload is annotated for Prometheus's pod discovery,
// on the port its container names metrics.
func TestMonitoringKubernetes(t *testing.T) {
	docs, _ := loadManifests(t, repoRoot(t))
	n := 0
	for _, d := range docs {
		if d.Kind != "Deployment" && d.Kind != "StatefulSet" {
			continue
		}
		n++
		ann := dig(d.raw, "spec", "template", "metadata", "annotations")
		if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: spec.template.metadata.annotations: want prometheus.io/scrape \"true\" and prometheus.io/path /metrics, have %v", d.where(), ann)
			continue
		}
		var metricsPort any
		containers, _ := dig(d.raw, "spec", "template", "spec")["containers"].([]any)
		for _, c := range containers {
			ports, _ := c.(map[string]any)["ports"].([]any)
			for _, p := range ports {
				if pm, _ := p.(map[string]any); pm["name"] == "metrics" {
					metricsPort = pm["containerPort"]
				}
			}
		}
		if metricsPort == nil || fmt.Sprint(metricsPort) != fmt.Sprint(ann["prometheus.io/port"]) {
			t.Errorf("%s: prometheus.io/port %v, but the container port named metrics is %v", d.where(), ann["prometheus.io/port"], metricsPort)
		}
	}
	if n == 0 {
		t.Fatalf("%s: no workloads", k8sDir)
	}
}
