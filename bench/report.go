package bench

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is one run's results, rendered as Markdown into docs/benchmarks.md.
type Report struct {
	Started   time.Time
	Duration  time.Duration
	LoadStart string      // /proc/loadavg when the run began
	Root      string      // repository root, to name profile files relative to it
	Machine   [][2]string // label, value
	Command   string      // how this run was invoked
	LoadEnd   string      // /proc/loadavg when the run ended
	Commit    string      // the commit measured
	Items     []*Item
	// Replace makes WriteDoc rewrite the whole generated section, dropping the results
	// of items this run did not measure.
	Replace bool
}

// Item is one numbered measurement of issue 10.
type Item struct {
	N      int
	Title  string
	Status string // "" when measured; otherwise why not ("skipped: ...", "failed: ...")
	Rows   []Row
	Notes  []string
	// Profile is the top of a CPU profile, shown when Mink is below half its baseline.
	Profile []Profile
}

// Profile is a CPU profile's summary.
type Profile struct {
	Name string // what was profiled
	Path string // the .pprof file (go tool pprof), or perf.data (perf report)
	Top  string // go tool pprof -top or perf report output, trimmed
	Perf bool   // recorded by Linux perf rather than pprof
}

// Row is one measurement beside its baseline.
type Row struct {
	What     string
	Mink     string
	Baseline string
	Ratio    string
	Low      bool // Mink is below 50% of its baseline
	Detail   bool // shown in the item's table only, not in the summary
}

// Speed is a throughput row: higher is better, the ratio is Mink/baseline.
func Speed(what string, mink, base float64, unit string) Row {
	r := Row{What: what, Mink: fmtNum(mink) + " " + unit, Baseline: fmtNum(base) + " " + unit}
	ratio := mink / base
	r.Ratio, r.Low = fmtRatio(ratio), ratio < 0.5
	return r
}

// detail marks r as shown in its item's table only.
func detail(r Row) Row {
	r.Detail = true
	return r
}

// Latency is a time row: lower is better, the ratio is baseline/Mink (1.0 = as fast).
func Latency(what string, mink, base time.Duration) Row {
	r := Row{What: what, Mink: fmtDur(mink), Baseline: fmtDur(base)}
	ratio := float64(base) / float64(mink)
	r.Ratio, r.Low = fmtRatio(ratio), ratio < 0.5
	return r
}

// Bound is a time row against an upper bound: the ratio is measured/bound, and at most
// 1 means within the bound.
func Bound(what string, measured, bound time.Duration) Row {
	ratio := float64(measured) / float64(bound)
	return Row{What: what, Mink: fmtDur(measured), Baseline: fmtDur(bound) + " (bound)", Ratio: fmt.Sprintf("%.2f of bound", ratio)}
}

// Info is a row with no baseline.
func Info(what, value string) Row { return Row{What: what, Mink: value, Baseline: "—", Ratio: "—"} }

func fmtRatio(r float64) string {
	switch {
	case math.IsNaN(r) || math.IsInf(r, 0):
		return "n/a"
	case r > 0 && r < 0.01:
		return fmt.Sprintf("%.1g×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

// fmtNum prints 3 significant digits with thousands kept readable.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f µs", float64(d)/1e3)
}

// Percentile returns the p-th percentile (0..100) of ds by nearest rank.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Describe fills the machine description.
func (r *Report) Describe(ctx context.Context, e *Env) {
	r.Root = e.Root
	mem := lineValue("/proc/meminfo", "MemTotal")
	if kb, err := parseKB(mem); err == nil {
		mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	r.LoadEnd, r.Commit = loadAvg(), gitDescribe(e.Root)
	r.Machine = [][2]string{
		{"CPU", lineValue("/proc/cpuinfo", "model name")},
		{"nproc", fmt.Sprint(runtime.NumCPU())},
		{"memory", mem},
		{"OS", runtime.GOOS + "/" + runtime.GOARCH + ", kernel " + strings.TrimSpace(string(kernel))},
		{"Go", runtime.Version()},
		{"Postgres", e.PostgresDesc(ctx)},
		{"Kafka", e.KafkaDesc()},
		{"load average (1, 5, 15 min)", "at start " + r.LoadStart + "; at end " + r.LoadEnd + " (other processes share the machine: read the ratios, each measured beside its baseline)"},
		{"commit", r.Commit},
		{"date", r.Started.UTC().Format("2006-01-02 15:04 MST")},
	}
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func parseKB(s string) (int64, error) {
	var kb int64
	_, err := fmt.Sscanf(s, "%d kB", &kb)
	return kb, err
}

func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " with uncommitted changes"
	}
	return c
}

// Markers delimit the generated part of docs/benchmarks.md; text outside them (the
// analysis) is kept when the harness rewrites the file.
const (
	BeginMarker = "<!-- minkbench:begin (generated by go run ./bench/cmd/minkbench; edit outside these markers) -->"
	EndMarker   = "<!-- minkbench:end -->"
)

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString(r.header())
	b.WriteString(summaryHead)
	for _, it := range r.Items {
		b.WriteString(summaryRows(it))
	}
	for _, it := range r.Items {
		b.WriteString(r.section(it))
	}
	return b.String()
}

// header is the run's date, machine and command: everything above the summary.
func (r *Report) header() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Results\n\n")
	w("Run of %s, %s in all.\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Duration.Round(time.Second))
	w("### Machine\n\n| | |\n|---|---|\n")
	for _, m := range r.Machine {
		w("| %s | %s |\n", m[0], cell(m[1]))
	}
	w("\n### Command\n\n```sh\n%s\n```\n\n", r.Command)
	return b.String()
}

const summaryHead = "### Summary\n\nRatios are Mink ÷ baseline for speeds and baseline ÷ Mink for latencies: 1.00× means as fast as the baseline; **bold** is below 0.50×.\n\n" +
	"| # | measurement | Mink | baseline | ratio |\n|---|---|---|---|---|\n"

// summaryRows are an item's lines of the summary table.
func summaryRows(it *Item) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	if it.Status != "" {
		st := cell(it.Status)
		if r := []rune(st); len(r) > 200 {
			st = string(r[:200]) + "… (see below)"
		}
		w("| %d | %s | %s | | |\n", it.N, cell(it.Title), st)
		return b.String()
	}
	for _, row := range it.Rows {
		if row.Ratio == "—" || row.Detail {
			continue
		}
		ratio := row.Ratio
		if row.Low {
			ratio = "**" + ratio + "**"
		}
		w("| %d | %s | %s | %s | %s |\n", it.N, cell(row.What), cell(row.Mink), cell(row.Baseline), ratio)
	}
	return b.String()
}

// section is an item's own part: its table, notes and profiles.
func (r *Report) section(it *Item) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n### %d. %s\n\n", it.N, it.Title)
	if it.Status != "" {
		w("%s\n\n", strings.TrimSpace(it.Status))
	}
	if len(it.Rows) > 0 {
		w("| measurement | Mink | baseline | ratio |\n|---|---|---|---|\n")
		for _, row := range it.Rows {
			w("| %s | %s | %s | %s |\n", cell(row.What), cell(row.Mink), cell(row.Baseline), cell(row.Ratio))
		}
	}
	if len(it.Notes) > 0 {
		w("\n")
		for _, n := range it.Notes {
			w("- %s\n", n)
		}
	}
	for _, p := range it.Profile {
		path := "<work>/profiles/" + filepath.Base(p.Path)
		if rel, err := filepath.Rel(r.Root, p.Path); err == nil && r.Root != "" && !strings.HasPrefix(rel, "..") {
			path = rel
		}
		how := "go tool pprof -top " + path
		if p.Perf {
			how = "perf report -i " + path
		}
		w("\n<details><summary>CPU profile: %s (<code>%s</code>)</summary>\n\n```\n%s\n```\n</details>\n", p.Name, how, p.Top)
	}
	return b.String()
}

// generated is a generated section taken apart: what lies above the summary, and each
// item's summary rows and section.
type generated struct {
	header   string
	rows     map[int]string
	sections map[int]string
}

var (
	summaryRow   = regexp.MustCompile(`^\| (\d+) \|`)
	sectionTitle = regexp.MustCompile(`(?m)^\n### (\d+)\. `)
)

// parseGenerated takes apart what Markdown wrote; ok is false when text is not that.
func parseGenerated(text string) (g generated, ok bool) {
	i := strings.Index(text, "\n"+summaryHead)
	if i < 0 {
		return g, false
	}
	g.header, text = text[:i+1], text[i+1+len(summaryHead):]
	g.rows, g.sections = map[int]string{}, map[int]string{}
	for text != "" {
		line, rest, _ := strings.Cut(text, "\n")
		m := summaryRow.FindStringSubmatch(line)
		if m == nil {
			break
		}
		n, _ := strconv.Atoi(m[1])
		g.rows[n] += line + "\n"
		text = rest
	}
	// Each section is a blank line, its title, and everything up to the next's.
	text = strings.TrimRight(text, "\n") + "\n"
	starts := sectionTitle.FindAllStringSubmatchIndex(text, -1)
	for k, m := range starts {
		end := len(text)
		if k+1 < len(starts) {
			end = starts[k+1][0]
		}
		n, _ := strconv.Atoi(text[m[2]:m[3]])
		g.sections[n] = text[m[0]:end]
	}
	return g, len(starts) > 0
}

// ranAgain matches the notes that say which items a later run measured again, as
// runNote writes them: "Items 3, 4 and 6 were run again ...", "Item 9 was run ...".
var ranAgain = regexp.MustCompile(`^Items? ([0-9, and]+) (?:were|was) run`)

// merge renders the report into the generated section old, keeping the results of the
// items this run did not measure: their summary rows and sections, and old's header
// (the machine and command of the run they came from), with a note saying which items
// this run replaced. ok is false when there is nothing to keep: then the whole section
// is this run's.
func (r *Report) merge(old string) (string, bool) {
	g, ok := parseGenerated(old)
	if !ok {
		return "", false
	}
	ran := map[int]*Item{}
	for _, it := range r.Items {
		ran[it.N] = it
	}
	nums := map[int]bool{}
	kept := false
	for n := range g.sections {
		nums[n] = true
		kept = kept || ran[n] == nil
	}
	if !kept {
		return "", false
	}
	for n := range ran {
		nums[n] = true
	}
	// The notes of earlier partial runs whose items all ran again now are out of date.
	paras := strings.Split(g.header, "\n\n")
	var header []string
	noted := false
	for _, p := range paras {
		if m := ranAgain.FindStringSubmatch(p); m != nil && allRan(m[1], ran) {
			continue
		}
		if strings.HasPrefix(p, "### Machine") && !noted {
			header, noted = append(header, r.runNote()), true
		}
		header = append(header, p)
	}
	var b strings.Builder
	b.WriteString(strings.Join(header, "\n\n"))
	if !noted {
		b.WriteString(r.runNote() + "\n\n")
	}
	b.WriteString(summaryHead)
	order := slices.Sorted(maps.Keys(nums))
	for _, n := range order {
		if it := ran[n]; it != nil {
			b.WriteString(summaryRows(it))
		} else {
			b.WriteString(g.rows[n])
		}
	}
	for _, n := range order {
		if it := ran[n]; it != nil {
			b.WriteString(r.section(it))
		} else {
			b.WriteString(g.sections[n])
		}
	}
	return b.String(), true
}

// allRan reports whether every item number in list ("3, 4 and 6") is in ran.
func allRan(list string, ran map[int]*Item) bool {
	f := strings.FieldsFunc(list, func(c rune) bool { return c == ',' || c == ' ' })
	any := false
	for _, w := range f {
		if w == "and" {
			continue
		}
		n, err := strconv.Atoi(w)
		if err != nil || ran[n] == nil {
			return false
		}
		any = true
	}
	return any
}

// runNote says which items this run measured, when, how and under what load.
func (r *Report) runNote() string {
	var ns []string
	for _, it := range r.Items {
		ns = append(ns, strconv.Itoa(it.N))
	}
	list, verb, own, their := "Item "+strings.Join(ns, ""), "was", "its", "Its"
	if len(ns) > 1 {
		list, verb, own, their = "Items "+strings.Join(ns[:len(ns)-1], ", ")+" and "+ns[len(ns)-1], "were", "their", "Their"
	}
	// The machine is named: a run of some items may not be on the machine of the rest.
	var machine []string
	for _, m := range r.Machine {
		if m[0] == "CPU" || m[0] == "nproc" || m[0] == "Go" {
			machine = append(machine, m[0]+" "+m[1])
		}
	}
	if len(machine) > 0 {
		machine = append(machine, "")
	}
	return fmt.Sprintf("%s %s run on %s own at %s, %s in all, with `%s` (%sload average at start %s, at end %s; commit %s). "+
		"%s rows and sections below are from that run; everything else is from the run above.",
		list, verb, own, r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Duration.Round(time.Second), r.Command,
		strings.Join(machine, ", "), r.LoadStart, r.LoadEnd, r.Commit, their)
}

// cell makes s safe inside a Markdown table cell: one line, pipes escaped.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// WriteDoc puts the report between the markers of the file at path, keeping everything
// outside them; a file without markers gets them appended. When this run measured only
// some items and the file holds results of others, those are kept (see merge) unless
// Replace is set.
func (r *Report) WriteDoc(path string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(old)
	i, j := strings.Index(doc, BeginMarker), strings.Index(doc, EndMarker)
	body := r.Markdown()
	if i >= 0 && j > i && !r.Replace {
		if merged, ok := r.merge(strings.TrimPrefix(doc[i+len(BeginMarker):j], "\n\n")); ok {
			body = merged
		}
	}
	gen := BeginMarker + "\n\n" + body + "\n" + EndMarker + "\n"
	switch {
	case i >= 0 && j > i:
		doc = doc[:i] + gen + strings.TrimPrefix(doc[j+len(EndMarker):], "\n")
	case doc == "":
		doc = "# Benchmarks\n\n" + gen
	default:
		doc = strings.TrimRight(doc, "\n") + "\n\n" + gen
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
