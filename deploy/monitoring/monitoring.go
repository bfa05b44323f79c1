// Package monitoring reads what operators look at: the Grafana dashboard
// (deploy/grafana/mink.json) and the Prometheus alerting rules
// (deploy/prometheus/alerts.yaml), and the PromQL in them, parsed with Prometheus's own
// parser. deploy/deploytest checks the files on their own; test/e2e checks that every
// metric and label they name is exported by running roles.
package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// The files, from the repository root.
const (
	DashboardFile = "deploy/grafana/mink.json"
	RulesFile     = "deploy/prometheus/alerts.yaml"
)

// Dashboard is what these checks read of a Grafana dashboard.
type Dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel; a row keeps its panels inside only while collapsed.
type Panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	Datasource  *Datasource `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *Datasource `json:"datasource"`
}

// Datasource names a data source by type and uid (a variable, as ${datasource}).
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Variable is a template variable; a query variable's query is a string or an object with
// a query field, depending on the Grafana version that saved it.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *Datasource     `json:"datasource"`
}

// QueryText is a query variable's query.
func (v Variable) QueryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	json.Unmarshal(v.Query, &o)
	return o.Query
}

// AllPanels are the dashboard's panels, those inside collapsed rows included.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

// RuleGroup is one group of rules, evaluated together.
type RuleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is an alerting rule (Alert set) or a recording rule (Record set).
type Rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// Name is the rule's alert or recorded series name.
func (r Rule) Name() string { return r.Alert + r.Record }

// LoadDashboard reads the dashboard under the repository root.
func LoadDashboard(root string) (*Dashboard, error) {
	b, err := os.ReadFile(filepath.Join(root, DashboardFile))
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", DashboardFile, err)
	}
	return &d, nil
}

// LoadRules reads the alerting rules under the repository root. Unknown fields are
// errors: Prometheus refuses them too.
func LoadRules(root string) (*RuleFile, error) {
	f, err := os.Open(filepath.Join(root, RulesFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var rf RuleFile
	if err := dec.Decode(&rf); err != nil {
		return nil, fmt.Errorf("%s: %w", RulesFile, err)
	}
	return &rf, nil
}

// Query is one PromQL expression of the dashboard or the rules, and where it is.
type Query struct {
	File  string // DashboardFile or RulesFile
	Where string // `panel "Lag per partition" (A)`, `alert MinkIndexerLagGrowing`, `variable table`
	Expr  string // as written, Grafana's variables included
	// Labels are the label names a Grafana variable reads off the expression's series
	// (label_values(expr, label)).
	Labels []string
}

func (q Query) String() string { return q.File + ": " + q.Where }

// Queries are every PromQL expression of the dashboard: each panel target and each
// query variable's label_values.
func (d *Dashboard) Queries() []Query {
	var out []Query
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			if strings.TrimSpace(t.Expr) != "" {
				out = append(out, Query{File: DashboardFile, Where: fmt.Sprintf("panel %q (%s)", p.Title, t.RefID), Expr: t.Expr})
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := Query{File: DashboardFile, Where: "variable " + v.Name, Expr: v.QueryText()}
		if m := labelValues.FindStringSubmatch(q.Expr); m != nil {
			q.Expr, q.Labels = m[1], []string{m[2]}
		}
		out = append(out, q)
	}
	return out
}

// labelValues is Grafana's label_values(expr, label) of a Prometheus query variable.
var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// Queries are the expressions of every rule.
func (f *RuleFile) Queries() []Query {
	var out []Query
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			kind := "alert"
			if r.Alert == "" {
				kind = "record"
			}
			out = append(out, Query{File: RulesFile, Where: kind + " " + r.Name(), Expr: r.Expr})
		}
	}
	return out
}

// grafanaIntervals are Grafana's interval variables, which stand where PromQL wants a
// duration.
var grafanaIntervals = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)(_s|_ms)?\}?`)

// Parse parses the expression as Prometheus would get it from Grafana: interval
// variables become a duration; others ($table) only stand inside label values here.
func (q Query) Parse() (parser.Expr, error) {
	e, err := parser.ParseExpr(grafanaIntervals.ReplaceAllString(q.Expr, "5m"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	return e, nil
}

// Selector is a metric an expression reads, and the labels its matchers name.
type Selector struct {
	Metric string
	Labels []string
}

// Grouping is a set of labels an aggregation (by) or a vector matching (on, group_left,
// group_right) needs, and the metrics under it, one of which at least must have each.
type Grouping struct {
	Labels  []string
	Metrics []string
}

// Uses are the metrics e reads and the labels it needs them to have.
func Uses(e parser.Expr) (sels []Selector, groups []Grouping) {
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			s := Selector{Metric: n.Name}
			for _, m := range n.LabelMatchers {
				if m.Name == "__name__" {
					if s.Metric == "" {
						s.Metric = m.Value
					}
					continue
				}
				s.Labels = append(s.Labels, m.Name)
			}
			sels = append(sels, s)
		case *parser.AggregateExpr:
			if !n.Without && len(n.Grouping) > 0 {
				groups = append(groups, Grouping{Labels: n.Grouping, Metrics: metricsUnder(n.Expr)})
			}
		case *parser.BinaryExpr:
			if vm := n.VectorMatching; vm != nil && (vm.On || len(vm.Include) > 0) {
				labels := append(slices.Clone(vm.Include), vm.MatchingLabels...)
				if !vm.On {
					labels = vm.Include
				}
				if len(labels) > 0 {
					groups = append(groups, Grouping{Labels: labels, Metrics: append(metricsUnder(n.LHS), metricsUnder(n.RHS)...)})
				}
			}
		}
		return nil
	})
	return sels, groups
}

// metricsUnder are the metric names an expression reads.
func metricsUnder(e parser.Node) []string {
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && !slices.Contains(out, vs.Name) {
			out = append(out, vs.Name)
		}
		return nil
	})
	return out
}
