package fileserver_test

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
	"pgregory.net/rapid"

	"github.com/minkhq/mink/pkg/auth"
	"github.com/minkhq/mink/pkg/kafkasrc/kafkatest"
	"github.com/minkhq/mink/pkg/layout"
	"github.com/minkhq/mink/pkg/lease/leasetest"
	"github.com/minkhq/mink/pkg/partition"
	"github.com/minkhq/mink/pkg/tables"
	"github.com/minkhq/mink/services/fileserver/internal/live"
	"github.com/minkhq/mink/services/fileserver/internal/plan"
)

// iceberg-go planning on the server (WithScanPlanningMode remote) reads every row a
// load names, the live tail included, and with a filter exactly the matching rows.
func TestPlanIcebergGoRemotePlanning(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, nil, false)
	n := le.planningNode(nodeOptions{})
	le.commitRound(30)
	le.produce(20) // the tail: neither indexed nor committed

	cat := le.catalogClient(n)
	if !cat.SupportsFullRemoteScanPlanning() {
		t.Fatal("the catalog does not advertise planning's endpoints")
	}
	tbl, err := cat.LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		t.Fatal(err)
	}
	read := func(opts ...table.ScanOption) []row {
		t.Helper()
		at, err := tbl.Scan(append(opts, table.WithScanPlanningMode(table.ScanPlanningRemote))...).ToArrowTable(le.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer at.Release()
		return rowsOf(t, at)
	}
	sameRows(t, "remote plan of everything", read(), le.rows)
	var want []row
	for _, r := range le.rows {
		if r.id >= 70 {
			want = append(want, r)
		}
	}
	sameRows(t, "remote plan of id >= 70", read(table.WithRowFilter(iceberg.GreaterThanEqual(iceberg.Reference("id"), int64(70)))), want)
}

// planner is one table's planning endpoints at a node, spoken in raw HTTP.
type planner struct {
	t      testing.TB
	base   string // .../v1/namespaces/{ns}/tables/{table}
	header map[string]string
}

func (le *liveEnv) planner(n *node) planner {
	return planner{t: le.t, base: n.catalog + "/v1/namespaces/" + ns + "/tables/" + le.name}
}

func (p planner) do(method, path, body string) (int, []byte) {
	p.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	for k, v := range p.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// plan posts a PlanTableScanRequest; the answer must be a 200 of the spec's shape.
func (p planner) plan(body string) planAnswer {
	p.t.Helper()
	code, b := p.do(http.MethodPost, "/plan", body)
	if code != http.StatusOK {
		p.t.Fatalf("plan %s: %d %s", body, code, b)
	}
	validateSpec(p.t, "PlanTableScanResult", b)
	var a planAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		p.t.Fatal(err)
	}
	var client rest.PlanTableScanResponse // as iceberg-go's client reads it, with its checks
	if err := json.Unmarshal(b, &client); err != nil {
		p.t.Fatalf("iceberg-go refuses the answer: %v: %s", err, b)
	}
	return a
}

// tasks fetches a plan task's file scan tasks.
func (p planner) tasks(planTask string) planAnswer {
	p.t.Helper()
	req, _ := json.Marshal(map[string]string{"plan-task": planTask})
	code, b := p.do(http.MethodPost, "/tasks", string(req))
	if code != http.StatusOK {
		p.t.Fatalf("tasks: %d %s", code, b)
	}
	validateSpec(p.t, "FetchScanTasksResult", b)
	var a planAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		p.t.Fatal(err)
	}
	var client rest.FetchScanTasksResponse
	if err := json.Unmarshal(b, &client); err != nil {
		p.t.Fatalf("iceberg-go refuses the answer: %v: %s", err, b)
	}
	return a
}

// all is every file scan task of a plan answer, its plan tasks fetched.
func (p planner) all(a planAnswer) []wireTask {
	p.t.Helper()
	out := slices.Clone(a.FileScanTasks)
	for _, pt := range a.PlanTasks {
		b := p.tasks(pt)
		if len(b.PlanTasks) != 0 {
			p.t.Fatalf("a plan task answered more plan tasks: %v", b.PlanTasks)
		}
		out = append(out, b.FileScanTasks...)
	}
	return out
}

// fails checks an error answer: the status, the spec's envelope with the exception
// type, a message saying says, and nothing of Mink's insides.
func (p planner) fails(method, path, body string, code int, typ, says string) {
	p.t.Helper()
	got, b := p.do(method, path, body)
	if got != code {
		p.t.Fatalf("%s %s %.100s: %d %s, want %d", method, path, body, got, b, code)
	}
	validateSpec(p.t, "IcebergErrorResponse", b)
	e := icebergError(p.t, b)
	if e.Type != typ || e.Code != code || !strings.Contains(e.Message, says) {
		p.t.Fatalf("%s %s %.100s: %+v, want %s saying %q", method, path, body, e, typ, says)
	}
	for _, inside := range []string{"SELECT", "mink_", "/tmp", ".go:", "pgx", "goroutine"} {
		if strings.Contains(e.Message, inside) {
			p.t.Fatalf("%s %s: the message tells of %q: %s", method, path, inside, e.Message)
		}
	}
}

type planAnswer struct {
	Status             string                   `json:"status"`
	PlanID             string                   `json:"plan-id"`
	FileScanTasks      []wireTask               `json:"file-scan-tasks"`
	PlanTasks          []string                 `json:"plan-tasks"`
	StorageCredentials []plan.StorageCredential `json:"storage-credentials"`
}

type wireTask struct {
	DataFile struct {
		FilePath    string             `json:"file-path"`
		RecordCount int64              `json:"record-count"`
		Partition   []json.RawMessage  `json:"partition"`
		LowerBounds *rest.RESTValueMap `json:"lower-bounds"`
		UpperBounds *rest.RESTValueMap `json:"upper-bounds"`
		ValueCounts *rest.RESTCountMap `json:"value-counts"`
	} `json:"data-file"`
	Residual json.RawMessage `json:"residual-filter"`
}

func paths(ts []wireTask) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.DataFile.FilePath)
	}
	slices.Sort(out)
	return out
}

// The planning schemas of the Iceberg REST OpenAPI document, compiled once.
var specSchemas = sync.OnceValues(func() (*jsonschema.Compiler, error) {
	raw, err := os.ReadFile("testdata/rest-catalog-open-api-planning.yaml")
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	// PrimitiveTypeValue's alternatives overlap (every hex string is a StringTypeValue,
	// a BinaryTypeValue and a FixedTypeValue; every integer an IntegerTypeValue and a
	// LongTypeValue), so no value is exactly one of them: read its oneOf as anyOf.
	ptv := doc["components"].(map[string]any)["schemas"].(map[string]any)["PrimitiveTypeValue"].(map[string]any)
	ptv["anyOf"] = ptv["oneOf"]
	delete(ptv, "oneOf")
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	return c, c.AddResource("file:///openapi.json", inst)
})

// validateSpec checks body against the named schema of the OpenAPI document.
func validateSpec(t testing.TB, schema string, body []byte) {
	t.Helper()
	c, err := specSchemas()
	if err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("file:///openapi.json#/components/schemas/" + schema)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("not a %s: %v\n%s", schema, err, body)
	}
}

// The answers have the spec's shapes; a plan over BatchFiles files comes in plan
// tasks that any server answers; GET answers the plan again; DELETE is a 204; the
// statistics of stats-fields come as the spec has them.
func TestPlanAnswersInTheSpecShapes(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, nil, false)
	a := le.startNode("fs-a", nodeOptions{planBatch: 2})
	b := le.startNode("fs-b", nodeOptions{planBatch: 2})
	le.waitMembers([]*node{a, b})
	for range 3 {
		le.commitRound(10)
	}
	le.produce(5) // and a tail

	// What a load names, as iceberg-go plans it for itself from the load.
	tbl, err := le.catalogClient(a).LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		t.Fatal(err)
	}
	local, err := tbl.Scan().PlanFiles(le.ctx)
	if err != nil {
		t.Fatal(err)
	}
	loaded := taskPaths(local)
	if len(loaded) != 2*4 {
		t.Fatalf("the load names %d files, want 8 (3 commits and a tail, 2 partitions)", len(loaded))
	}

	pa, pb := le.planner(a), le.planner(b)
	ans := pa.plan(`{}`)
	if ans.Status != "completed" || ans.PlanID == "" || len(ans.FileScanTasks) != 2 || len(ans.PlanTasks) != 3 {
		t.Fatalf("plan: status %q, id %q, %d tasks, %d plan tasks; want completed with 2 and 3", ans.Status, ans.PlanID, len(ans.FileScanTasks), len(ans.PlanTasks))
	}
	// Plan tasks are stateless: the other server answers them.
	if got := paths(pb.all(ans)); !slices.Equal(got, loaded) {
		t.Fatalf("planned (tasks through b)\n%v\nwant what the load names\n%v", got, loaded)
	}
	for _, task := range ans.FileScanTasks {
		if task.Residual != nil || task.DataFile.LowerBounds != nil || task.DataFile.ValueCounts != nil {
			t.Errorf("without filter nor stats-fields: residual %s, bounds %v, counts %v", task.Residual, task.DataFile.LowerBounds, task.DataFile.ValueCounts)
		}
		if len(task.DataFile.Partition) != 1 {
			t.Errorf("partition %s: want the Kafka partition", task.DataFile.Partition)
		}
	}

	// GET answers the same plan, on either server; the plan id stays valid.
	for _, p := range []planner{pa, pb} {
		code, body := p.do(http.MethodGet, "/plan/"+ans.PlanID, "")
		if code != http.StatusOK {
			t.Fatalf("GET plan: %d %s", code, body)
		}
		validateSpec(t, "FetchPlanningResult", body)
		var again planAnswer
		json.Unmarshal(body, &again)
		if again.Status != "completed" || !slices.Equal(paths(p.all(again)), loaded) {
			t.Fatalf("GET plan: %s", body)
		}
	}
	if code, body := pb.do(http.MethodDelete, "/plan/"+ans.PlanID, ""); code != http.StatusNoContent {
		t.Fatalf("DELETE plan: %d %s", code, body)
	}

	// stats-fields: the statistics of those fields only, bounds as hex of Iceberg's
	// single-value binary form (little-endian for a long).
	idField, _ := tbl.Schema().FindFieldByName("id")
	stats := pa.all(pa.plan(`{"stats-fields": ["id"], "filter": {"type": "gt-eq", "term": "id", "value": 0}}`))
	if len(stats) != len(loaded) {
		t.Fatalf("%d files with stats-fields, want %d", len(stats), len(loaded))
	}
	for _, task := range stats {
		lb, ub := task.DataFile.LowerBounds, task.DataFile.UpperBounds
		if lb == nil || ub == nil || !slices.Equal(lb.Keys, []int{idField.ID}) || !slices.Equal(ub.Keys, []int{idField.ID}) {
			t.Fatalf("bounds of %s: %+v %+v, want those of id (%d) alone", task.DataFile.FilePath, lb, ub, idField.ID)
		}
		lo, hi := le64hex(t, lb.Values[0]), le64hex(t, ub.Values[0])
		rows := le.fileRows(a, task.DataFile.FilePath)
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.id)
		}
		if len(ids) == 0 || lo != slices.Min(ids) || hi != slices.Max(ids) || task.DataFile.RecordCount != int64(len(rows)) {
			t.Fatalf("%s: bounds [%d, %d] over %d records, its ids are %v", task.DataFile.FilePath, lo, hi, task.DataFile.RecordCount, ids)
		}
		if string(task.Residual) != `{"type":"gt-eq","term":"id","value":0}` {
			t.Errorf("residual %s, want the filter", task.Residual)
		}
	}

	// What no statistics decide (a function) keeps every file, and the residual is
	// the request's own filter; beside a predicate they do decide, in an and, that one
	// prunes.
	fn := `{"type":"eq","left":{"type":"apply","function":"lower","arguments":[{"type":"reference","name":"msg"}]},"right":"x"}`
	orFilter := `{"type":"or","left":` + fn + `,"right":{"type":"lt","term":"id","value":-5}}`
	kept := pa.all(pa.plan(`{"filter": ` + orFilter + `}`))
	if !slices.Equal(paths(kept), loaded) {
		t.Fatalf("a function or'ed: planned %v, want every file", paths(kept))
	}
	for _, task := range kept {
		if string(task.Residual) != orFilter {
			t.Fatalf("residual %s, want the request's filter %s", task.Residual, orFilter)
		}
	}
	if got := pa.all(pa.plan(`{"filter": {"type":"and","left":` + fn + `,"right":{"type":"lt","term":"id","value":-5}}}`)); len(got) != 0 {
		t.Fatalf("a function and'ed with id < -5: planned %v, want none", paths(got))
	}

	// A filter on the partition alone leaves nothing to filter in the files kept.
	part := pa.all(pa.plan(`{"filter": {"type": "eq", "term": "_kafka_partition", "value": 1}}`))
	if len(part) != len(loaded)/2 {
		t.Fatalf("%d files of partition 1, want %d", len(part), len(loaded)/2)
	}
	for _, task := range part {
		if string(task.Residual) != "true" || string(task.DataFile.Partition[0]) != "1" {
			t.Errorf("%s: partition %s, residual %s; want 1 and true", task.DataFile.FilePath, task.DataFile.Partition, task.Residual)
		}
	}
}

func le64hex(t testing.TB, h string) int64 {
	t.Helper()
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 8 || h != strings.ToUpper(h) {
		t.Fatalf("bound %q is not the upper-case hex of 8 bytes", h)
	}
	var v int64
	for i := 7; i >= 0; i-- {
		v = v<<8 | int64(b[i])
	}
	return v
}

// fileRows reads a data file through n's S3 API.
func (le *liveEnv) fileRows(n *node, uri string) []row {
	le.t.Helper()
	at := le.readFile(n, uri)
	defer at.Release()
	return rowsOf(le.t, at)
}

// readFile reads a data file through n's S3 API as an Arrow table.
func (le *liveEnv) readFile(n *node, uri string) arrow.Table {
	le.t.Helper()
	key, err := layout.KeyOf(uri)
	if err != nil {
		le.t.Fatal(err)
	}
	resp, body := get(le.t, http.MethodGet, objectURL(n, key), nil)
	if resp.StatusCode != http.StatusOK {
		le.t.Fatalf("GET %s: %d %s", key, resp.StatusCode, body)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		le.t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
	if err != nil {
		le.t.Fatal(err)
	}
	at, err := fr.ReadTable(le.ctx)
	if err != nil {
		le.t.Fatal(err)
	}
	return at
}

// produceVaried writes n records to each partition: most {"id": N, "msg": "click N"},
// some without msg (null), some not JSON (error rows: id and msg null), some without a
// key; their timestamps grow with their ids.
func (le *liveEnv) produceVaried(n int) {
	le.t.Helper()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for p := range int32(livePartitions) {
		var recs []*kgo.Record
		for i := range n {
			id := le.nextID
			le.nextID++
			r := &kgo.Record{Topic: le.name, Partition: p, Key: fmt.Appendf(nil, "u-%d", id),
				Value: fmt.Appendf(nil, `{"id": %d, "msg": "click %d"}`, id, id), Timestamp: base.Add(time.Duration(id) * time.Millisecond)}
			switch i % 6 {
			case 1:
				r.Value = fmt.Appendf(nil, `{"id": %d}`, id)
			case 2:
				r.Value = []byte("not json")
			case 3:
				r.Key = nil
			}
			recs = append(recs, r)
		}
		kafkatest.Produce(le.t, le.prod, recs...)
	}
}

// structRow is one row of a data file, by the position of its field in the table's
// schema, as iceberg-go's row evaluator reads rows.
type structRow []any

func (r structRow) Size() int          { return len(r) }
func (r structRow) Get(pos int) any    { return r[pos] }
func (r structRow) Set(pos int, v any) { r[pos] = v }

// structRows reads a data file's rows with the values iceberg-go's evaluator compares.
func (le *liveEnv) structRows(n *node, schema *iceberg.Schema, uri string) []structRow {
	le.t.Helper()
	at := le.readFile(n, uri)
	defer at.Release()
	fields := schema.Fields()
	cols := make([]int, len(fields))
	for i, f := range fields {
		idx := at.Schema().FieldIndices(f.Name)
		if len(idx) != 1 {
			le.t.Fatalf("%s has no column %s", uri, f.Name)
		}
		cols[i] = idx[0]
	}
	tr := array.NewTableReader(at, 1<<16)
	defer tr.Release()
	var out []structRow
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := range int(rec.NumRows()) {
			r := make(structRow, len(fields))
			for c, col := range cols {
				a := rec.Column(col)
				if a.IsNull(i) {
					continue
				}
				switch a := a.(type) {
				case *array.Int32:
					r[c] = a.Value(i)
				case *array.Int64:
					r[c] = a.Value(i)
				case *array.String:
					r[c] = a.Value(i)
				case *array.Binary:
					r[c] = slices.Clone(a.Value(i))
				case *array.Timestamp:
					r[c] = iceberg.Timestamp(a.Value(i))
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// genFilter is a random filter over the table's columns with literals near its values,
// as a tree both spellings are written from.
type genFilter struct {
	op     string
	col    string
	lits   []any // Go values: int64, int32, string, []byte, iceberg.Timestamp
	kids   []*genFilter
	constV bool
}

type colPool struct {
	name string
	ops  []string
	vals []any
}

func drawFilter(t *rapid.T, pools []colPool, depth int) *genFilter {
	kind := "leaf"
	if depth > 0 {
		kind = rapid.SampledFrom([]string{"leaf", "leaf", "and", "or", "not", "const"}).Draw(t, "kind")
	}
	switch kind {
	case "and", "or":
		return &genFilter{op: kind, kids: []*genFilter{drawFilter(t, pools, depth-1), drawFilter(t, pools, depth-1)}}
	case "not":
		return &genFilter{op: kind, kids: []*genFilter{drawFilter(t, pools, depth-1)}}
	case "const":
		return &genFilter{op: "const", constV: rapid.Bool().Draw(t, "const")}
	}
	pool := rapid.SampledFrom(pools).Draw(t, "column")
	g := &genFilter{op: rapid.SampledFrom(pool.ops).Draw(t, "op"), col: pool.name}
	lit := func() any {
		v := rapid.SampledFrom(pool.vals).Draw(t, "value")
		switch x := v.(type) { // near the data: at, just below or just above a value
		case int64:
			return x + rapid.Int64Range(-1, 1).Draw(t, "nudge")
		case int32:
			return x + int32(rapid.IntRange(-1, 1).Draw(t, "nudge"))
		case iceberg.Timestamp:
			return x + iceberg.Timestamp(rapid.Int64Range(-1, 1).Draw(t, "nudge"))
		case string:
			return x[:rapid.IntRange(0, len(x)).Draw(t, "prefix")]
		}
		return v
	}
	switch g.op {
	case "is-null", "not-null":
	case "in", "not-in":
		for range rapid.IntRange(1, 3).Draw(t, "set") {
			g.lits = append(g.lits, lit())
		}
	default:
		g.lits = []any{lit()}
	}
	return g
}

func litJSON(v any) any {
	switch x := v.(type) {
	case []byte:
		return strings.ToUpper(hex.EncodeToString(x))
	case iceberg.Timestamp:
		return x.ToTime().UTC().Format("2006-01-02T15:04:05.999999-07:00")
	}
	return v
}

// legacy is g as Java's ExpressionParser writes it: what iceberg-go parses, the truth.
func (g *genFilter) legacy() any {
	switch g.op {
	case "const":
		return g.constV
	case "and", "or":
		return map[string]any{"type": g.op, "left": g.kids[0].legacy(), "right": g.kids[1].legacy()}
	case "not":
		return map[string]any{"type": "not", "child": g.kids[0].legacy()}
	}
	m := map[string]any{"type": g.op, "term": g.col}
	switch {
	case g.op == "in" || g.op == "not-in":
		var vs []any
		for _, v := range g.lits {
			vs = append(vs, litJSON(v))
		}
		m["values"] = vs
	case len(g.lits) == 1:
		m["value"] = litJSON(g.lits[0])
	}
	return m
}

// spelled is g in a spelling drawn at random from the spec's: legacy or newer operand
// forms, mirrored comparisons, typed literals, names in another case.
func (g *genFilter) spelled(t *rapid.T, schema *iceberg.Schema, anyCase bool) any {
	switch g.op {
	case "const":
		if rapid.Bool().Draw(t, "const object") {
			return map[string]any{"type": fmt.Sprint(g.constV)}
		}
		return g.constV
	case "and", "or":
		return map[string]any{"type": g.op, "left": g.kids[0].spelled(t, schema, anyCase), "right": g.kids[1].spelled(t, schema, anyCase)}
	case "not":
		return map[string]any{"type": "not", "child": g.kids[0].spelled(t, schema, anyCase)}
	}
	name := g.col
	if anyCase && rapid.Bool().Draw(t, "upper") {
		name = strings.ToUpper(name)
	}
	var ref any = name
	switch rapid.IntRange(0, 3).Draw(t, "reference") {
	case 1:
		ref = map[string]any{"type": "reference", "name": name}
	case 2:
		f, _ := schema.FindFieldByName(g.col)
		ref = map[string]any{"type": "reference", "id": f.ID}
	case 3:
		ref = map[string]any{"type": "reference", "term": name}
	}
	lit := func(v any) any {
		if rapid.Bool().Draw(t, "typed") {
			return map[string]any{"type": "literal", "value": litJSON(v)}
		}
		return litJSON(v)
	}
	_, named := ref.(string)
	newForm := !named && rapid.Bool().Draw(t, "new form")
	m := map[string]any{"type": g.op}
	switch {
	case g.op == "in" || g.op == "not-in" || g.op == "is-null" || g.op == "not-null":
		if newForm {
			m["child"] = ref
		} else {
			m["term"] = ref
		}
		if len(g.lits) > 0 {
			var vs []any
			for _, v := range g.lits {
				vs = append(vs, lit(v))
			}
			m["values"] = vs
		}
	case newForm:
		mirror := map[string]string{"lt": "gt", "lt-eq": "gt-eq", "gt": "lt", "gt-eq": "lt-eq", "eq": "eq", "not-eq": "not-eq"}
		if op, ok := mirror[g.op]; ok && rapid.Bool().Draw(t, "mirrored") {
			m["type"], m["left"], m["right"] = op, lit(g.lits[0]), ref
		} else {
			m["left"], m["right"] = ref, lit(g.lits[0])
		}
	default:
		m["term"], m["value"] = ref, lit(g.lits[0])
	}
	return m
}

// Plans never prune a file holding a row the filter matches, for random filters over
// every kind of column (nulls, error rows, keys, timestamps, the partition) in every
// spelling of the spec, the live tail included; each kept file's residual filter
// matches its rows exactly as the filter does. Checked by reading every file.
func TestPlanNeverPrunesAMatchingRow(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, nil, false)
	n := le.planningNode(nodeOptions{planBatch: 3})
	for range 3 {
		le.produceVaried(12)
		le.index(1 << 62)
		le.commit()
	}
	le.produceVaried(6) // the tail

	tbl, err := le.catalogClient(n).LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		t.Fatal(err)
	}
	schema := tbl.Schema()
	p := le.planner(n)
	everything := paths(p.all(p.plan(`{}`)))
	if len(everything) != 8 {
		t.Fatalf("%d files, want 8", len(everything))
	}
	rows := map[string][]structRow{}
	pools := map[string]*colPool{}
	numeric := []string{"lt", "lt-eq", "gt", "gt-eq", "eq", "not-eq", "in", "not-in", "is-null", "not-null"}
	for _, c := range []struct {
		name string
		ops  []string
	}{
		{"id", numeric}, {"_kafka_offset", numeric}, {"_kafka_partition", numeric},
		{"msg", append(slices.Clone(numeric), "starts-with", "not-starts-with")},
		{"_mink_error", []string{"is-null", "not-null", "starts-with", "not-starts-with", "eq"}},
		{"_kafka_timestamp", numeric}, {"_kafka_key", []string{"eq", "not-eq", "lt", "gt-eq", "in", "not-in", "is-null", "not-null"}},
	} {
		pools[c.name] = &colPool{name: c.name, ops: c.ops}
	}
	var total int
	for _, f := range everything {
		rows[f] = le.structRows(n, schema, f)
		total += len(rows[f])
		for _, r := range rows[f] {
			for i, field := range schema.Fields() {
				if pool := pools[field.Name]; pool != nil && r[i] != nil {
					pool.vals = append(pool.vals, r[i])
				}
			}
		}
	}
	if want := 2 * (3*12 + 6); total != want {
		t.Fatalf("the files hold %d rows, want %d", total, want)
	}
	var poolList []colPool
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		poolList = append(poolList, *pools[name])
	}

	pos := map[int]int{}
	for i, f := range schema.Fields() {
		pos[f.ID] = i
	}
	// selects is whether an engine returns r for e: SQL's logic, where a comparison
	// with null is unknown and a row is returned only when the filter is true.
	selects := func(rt *rapid.T, e iceberg.BooleanExpression, r structRow) bool {
		bound, err := iceberg.BindExpr(schema, e, true)
		if err != nil {
			rt.Fatalf("bind %s: %v", e, err)
		}
		v, err := iceberg.VisitExpr[tri](bound, sqlEval{row: r, pos: pos})
		if err != nil {
			rt.Fatalf("evaluate %s: %v", e, err)
		}
		return v == triTrue
	}

	pruned := 0
	rapid.Check(t, func(rt *rapid.T) {
		g := drawFilter(rt, poolList, 3)
		anyCase := rapid.Bool().Draw(rt, "case-insensitive")
		truthJSON, _ := json.Marshal(g.legacy())
		truth, err := iceberg.ParseExpr(truthJSON, schema)
		if err != nil {
			rt.Fatalf("truth %s: %v", truthJSON, err)
		}
		req := map[string]any{"filter": g.spelled(rt, schema, anyCase)}
		if anyCase {
			req["case-sensitive"] = false
		}
		body, _ := json.Marshal(req)
		kept := map[string]wireTask{}
		for _, task := range p.all(p.plan(string(body))) {
			kept[task.DataFile.FilePath] = task
		}
		for _, f := range everything {
			task, ok := kept[f]
			var residual iceberg.BooleanExpression
			if ok {
				if task.Residual == nil {
					rt.Fatalf("%s: no residual, with the filter %s", f, body)
				}
				// In the table's names whatever case the request used: the filter is
				// exact here (nothing undecidable, no renames), so the residual is
				// iceberg-go's, bound to the schema.
				if residual, err = iceberg.ParseExpr(task.Residual, schema); err != nil {
					rt.Fatalf("%s: residual %s: %v", f, task.Residual, err)
				}
			} else {
				pruned++
			}
			for _, r := range rows[f] {
				m := selects(rt, truth, r)
				if m && !ok {
					rt.Fatalf("filter %s (truth %s) pruned %s, which holds a matching row %v", body, truthJSON, f, r)
				}
				if ok && selects(rt, residual, r) != m {
					rt.Fatalf("%s: residual %s and the filter %s disagree on row %v", f, task.Residual, truthJSON, r)
				}
			}
		}
	})
	if pruned == 0 {
		t.Fatal("no filter pruned any file: pruning does not work")
	}
	t.Logf("%d files pruned over the filters drawn", pruned)
}

// tri is a value of SQL's three-valued logic.
type tri int8

const (
	triFalse tri = iota
	triUnknown
	triTrue
)

// sqlEval evaluates a bound filter over one row as engines do.
type sqlEval struct {
	row structRow
	pos map[int]int // field id -> position in the row
}

func (sqlEval) VisitTrue() tri  { return triTrue }
func (sqlEval) VisitFalse() tri { return triFalse }
func (sqlEval) VisitNot(c tri) tri {
	return triTrue - c // true and false swap; unknown stays
}
func (sqlEval) VisitAnd(l, r tri) tri { return min(l, r) }
func (sqlEval) VisitOr(l, r tri) tri  { return max(l, r) }
func (sqlEval) VisitUnbound(iceberg.UnboundPredicate) tri {
	panic("evaluate a bound filter")
}

func (e sqlEval) VisitBound(p iceberg.BoundPredicate) tri {
	v := e.row[e.pos[p.Ref().Field().ID]]
	is := func(b bool) tri {
		if b {
			return triTrue
		}
		return triFalse
	}
	switch p.Op() {
	case iceberg.OpIsNull:
		return is(v == nil)
	case iceberg.OpNotNull:
		return is(v != nil)
	}
	if v == nil {
		return triUnknown
	}
	if sp, ok := p.(iceberg.BoundSetPredicate); ok {
		in := slices.ContainsFunc(sp.Literals().Members(), func(l iceberg.Literal) bool { return compareValues(v, l.Any()) == 0 })
		return is(in == (p.Op() == iceberg.OpIn))
	}
	lit := p.(iceberg.BoundLiteralPredicate).Literal().Any()
	c := compareValues(v, lit)
	switch p.Op() {
	case iceberg.OpLT:
		return is(c < 0)
	case iceberg.OpLTEQ:
		return is(c <= 0)
	case iceberg.OpGT:
		return is(c > 0)
	case iceberg.OpGTEQ:
		return is(c >= 0)
	case iceberg.OpEQ:
		return is(c == 0)
	case iceberg.OpNEQ:
		return is(c != 0)
	case iceberg.OpStartsWith:
		return is(strings.HasPrefix(v.(string), lit.(string)))
	case iceberg.OpNotStartsWith:
		return is(!strings.HasPrefix(v.(string), lit.(string)))
	}
	panic(fmt.Sprintf("no evaluation of %s", p))
}

// compareValues orders a row's value and a literal's, of the same column.
func compareValues(a, b any) int {
	switch a := a.(type) {
	case int32:
		return cmp.Compare(a, b.(int32))
	case int64:
		return cmp.Compare(a, b.(int64))
	case iceberg.Timestamp:
		return cmp.Compare(a, b.(iceberg.Timestamp))
	case string:
		return strings.Compare(a, b.(string))
	case []byte:
		return bytes.Compare(a, b.([]byte))
	}
	panic(fmt.Sprintf("no order of %T", a))
}

// planningNode starts a file server with options o, and waits until it sees itself.
func (le *liveEnv) planningNode(o nodeOptions) *node {
	le.t.Helper()
	n := le.startNode("fs-a", o)
	le.waitMembers([]*node{n})
	return n
}

// commitRound produces n records to each partition, indexes and commits them.
func (le *liveEnv) commitRound(n int) {
	le.t.Helper()
	le.produce(n)
	le.index(1 << 62)
	le.commit()
}

// addTable adds a table with the env table's committed metadata.
func (le *liveEnv) addTable(name string) {
	le.t.Helper()
	le.addTableSpec(name, nil)
}

// addTableSpec is addTable of a table stored with partition spec ps (nil: none).
func (le *liveEnv) addTableSpec(name string, ps *partition.Spec) {
	le.t.Helper()
	tbl, err := tables.Create(le.ctx, le.db, tables.Table{Namespace: ns, Name: name, Topic: le.name, Spec: spec, PartitionSpec: ps}, livePartitions)
	if err != nil {
		le.t.Fatal(err)
	}
	if _, err := le.db.Exec(le.ctx, `INSERT INTO mink_table_meta (table_id, metadata_key, version) VALUES ($1, $2, 1)`, tbl.ID, le.metaKey); err != nil {
		le.t.Fatal(err)
	}
}

// liveCalls counts the live loads n made or answered.
func liveCalls(n *node) int64 {
	s := n.srv.LiveStats()
	return s.Loads + s.Reused + s.Committed + s.Disabled + s.Failed
}

// taskPaths are the files of tasks that iceberg-go planned, in order.
func taskPaths(tasks []table.FileScanTask) []string {
	var out []string
	for _, task := range tasks {
		out = append(out, task.File.FilePath())
	}
	slices.Sort(out)
	return out
}

// A point-in-time plan of a committed snapshot needs no live load; an incremental one
// names the files appended between its snapshots; both as iceberg-go plans them itself.
func TestPlanSnapshotsAndIncrementalScans(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, nil, false)
	n := le.planningNode(nodeOptions{})
	var snaps []int64
	for range 3 {
		le.commitRound(8)
		snaps = append(snaps, le.base.Metadata.CurrentSnapshot().SnapshotID)
	}
	le.produce(4) // a tail, in loads only
	tbl, err := le.catalogClient(n).LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		t.Fatal(err)
	}
	p := le.planner(n)
	plan := func(body string) []string { t.Helper(); return paths(p.all(p.plan(body))) }
	// What iceberg-go plans for itself from the load.
	localPlan := func(tasks []table.FileScanTask, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return taskPaths(tasks)
	}

	before := liveCalls(n)
	for _, s := range snaps {
		got := plan(fmt.Sprintf(`{"snapshot-id": %d, "use-snapshot-schema": true}`, s))
		if want := localPlan(tbl.Scan(table.WithSnapshotID(s)).PlanFiles(le.ctx)); !slices.Equal(got, want) || len(got) == 0 {
			t.Fatalf("snapshot %d: planned %v, iceberg-go plans %v", s, got, want)
		}
	}
	if got := liveCalls(n); got != before {
		t.Fatalf("plans of committed snapshots made %d live loads", got-before)
	}

	inc := func(from *int64, to int64) []string {
		t.Helper()
		s := tbl.NewIncrementalAppendScan().ToSnapshot(to)
		if from != nil {
			s = s.FromSnapshotExclusive(*from)
		}
		return localPlan(s.PlanFiles(le.ctx))
	}
	got := plan(fmt.Sprintf(`{"start-snapshot-id": %d, "end-snapshot-id": %d}`, snaps[0], snaps[2]))
	if want := inc(&snaps[0], snaps[2]); !slices.Equal(got, want) || len(got) != 4 {
		t.Fatalf("incremental (%d, %d]: planned %v, iceberg-go plans %v", snaps[0], snaps[2], got, want)
	}
	got = plan(fmt.Sprintf(`{"end-snapshot-id": %d}`, snaps[1]))
	if want := inc(nil, snaps[1]); !slices.Equal(got, want) || len(got) != 4 {
		t.Fatalf("incremental up to %d: planned %v, iceberg-go plans %v", snaps[1], got, want)
	}
	// Up to the live snapshot of the load: the tail is the last append.
	current := tbl.Metadata().CurrentSnapshot().SnapshotID
	got = plan(fmt.Sprintf(`{"start-snapshot-id": %d, "end-snapshot-id": %d}`, snaps[2], current))
	if want := inc(&snaps[2], current); !slices.Equal(got, want) || len(got) != 2 {
		t.Fatalf("incremental from the last commit to the load's snapshot: planned %v, iceberg-go plans %v", got, want)
	}
	p.fails(http.MethodPost, "/plan", fmt.Sprintf(`{"start-snapshot-id": %d, "end-snapshot-id": %d}`, snaps[2], snaps[0]),
		http.StatusBadRequest, "BadRequestException", "is not an ancestor")
}

// Bad input is a 400 naming what is wrong; a plan id or plan task that is not one, is
// of another table or another kind, is the spec's 404; none tells of Mink's insides.
func TestPlanRefusesBadRequests(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, nil, false)
	n := le.planningNode(nodeOptions{planBatch: 1})
	le.commitRound(5)
	p := le.planner(n)
	const bad = "BadRequestException"
	for _, c := range []struct{ body, says string }{
		{`{`, "not a PlanTableScanRequest"},
		{`[]`, "not a PlanTableScanRequest"},
		{`{} {}`, "more than one JSON value"},
		{`{"snapshot-id": "1"}`, "snapshot-id: a string is not a valid value here"},
		{`{"snapshot-id": 1, "end-snapshot-id": 2}`, "point-in-time"},
		{`{"start-snapshot-id": 1}`, "end-snapshot-id: is required"},
		{`{"min-rows-requested": -1}`, "min-rows-requested: is negative"},
		{`{"snapshot-id": 12345}`, "has no snapshot 12345"},
		{`{"end-snapshot-id": 12345}`, "end-snapshot-id: table default.clicks has no snapshot 12345"},
		{`{"filter": {"type": "lt", "term": "nope", "value": 1}}`, `filter.term: the table has no column "nope"`},
		{`{"filter": {"type": "lt", "term": "ID", "value": 1}}`, `no column "ID"`},
		{`{"filter": {"type": "bogus"}}`, `unknown expression type "bogus"`},
		{`{"filter": {"type": "lt", "term": "id", "value": "ten"}}`, "filter: "},
		{`{"filter": 5}`, "an expression is true, false or an object"},
		{`{"select": ["id", "nope"]}`, `select[1]: the table has no column "nope"`},
		{`{"stats-fields": ["nope"]}`, `stats-fields[0]: the table has no column "nope"`},
	} {
		p.fails(http.MethodPost, "/plan", c.body, http.StatusBadRequest, bad, c.says)
	}
	ans := p.plan(`{}`)
	if len(ans.PlanTasks) == 0 {
		t.Fatal("no plan tasks with a batch of one file")
	}
	p.fails(http.MethodGet, "/plan/garbage", "", http.StatusNotFound, "NoSuchPlanIdException", "does not exist")
	p.fails(http.MethodDelete, "/plan/p1.AAAA.AAAAAAAAAAAAAAAA", "", http.StatusNotFound, "NoSuchPlanIdException", "does not exist")
	p.fails(http.MethodGet, "/plan/"+ans.PlanTasks[0], "", http.StatusNotFound, "NoSuchPlanIdException", "is a plan task")
	p.fails(http.MethodPost, "/tasks", `{}`, http.StatusBadRequest, bad, "plan-task")
	p.fails(http.MethodPost, "/tasks", `{"plan-task": 5}`, http.StatusBadRequest, bad, "plan-task")
	p.fails(http.MethodPost, "/tasks", `{"plan-task": "garbage"}`, http.StatusNotFound, "NoSuchPlanTaskException", "does not exist")
	p.fails(http.MethodPost, "/tasks", `{"plan-task": "`+ans.PlanID+`"}`, http.StatusNotFound, "NoSuchPlanTaskException", "is a plan id")
	edited := ans.PlanTasks[0][:len(ans.PlanTasks[0])-3] + "xyz"
	p.fails(http.MethodPost, "/tasks", `{"plan-task": "`+edited+`"}`, http.StatusNotFound, "NoSuchPlanTaskException", "does not exist")

	// Another table's plan id and plan task are not this table's.
	le.addTable("other")
	po := planner{t: t, base: n.catalog + "/v1/namespaces/" + ns + "/tables/other"}
	po.fails(http.MethodGet, "/plan/"+ans.PlanID, "", http.StatusNotFound, "NoSuchPlanIdException", "of another table")
	po.fails(http.MethodPost, "/tasks", `{"plan-task": "`+ans.PlanTasks[0]+`"}`, http.StatusNotFound, "NoSuchPlanTaskException", "of another table")

	// Missing tables and namespaces, as a load says them.
	pt := planner{t: t, base: n.catalog + "/v1/namespaces/" + ns + "/tables/nope"}
	pt.fails(http.MethodPost, "/plan", `{}`, http.StatusNotFound, "NoSuchTableException", "does not exist")
	pt.fails(http.MethodPost, "/tasks", `{"plan-task": "`+ans.PlanTasks[0]+`"}`, http.StatusNotFound, "NoSuchTableException", "does not exist")
	pn := planner{t: t, base: n.catalog + "/v1/namespaces/nope/tables/clicks"}
	pn.fails(http.MethodGet, "/plan/"+ans.PlanID, "", http.StatusNotFound, "NoSuchNamespaceException", "does not exist")

	// A body past the catalog's bound, sent without a length.
	req, err := http.NewRequest(http.MethodPost, p.base+"/plan", io.MultiReader(strings.NewReader(`{"select": ["`+strings.Repeat("x", 2<<20)+`"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || icebergError(t, body).Type != "RequestTooLargeException" {
		t.Fatalf("a 2 MiB body: %d %s", resp.StatusCode, body)
	}

	// /v1/config names planning's endpoints, as the spec spells them.
	resp, cfg := get(t, http.MethodGet, n.catalog+"/v1/config", nil)
	var config struct {
		Endpoints []string `json:"endpoints"`
	}
	if err := json.Unmarshal(cfg, &config); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("config: %d %s", resp.StatusCode, cfg)
	}
	for _, want := range []string{
		"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
		"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
		"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
		"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
	} {
		if !slices.Contains(config.Endpoints, want) {
			t.Errorf("config endpoints lack %q: %v", want, config.Endpoints)
		}
	}
}

// Plan tasks are answered from their metadata file while it is stored, then from the
// committed metadata while it has their snapshot; a live load's expire with the load.
func TestPlanTasksLiveAsLongAsTheirSnapshot(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, map[string]string{"mink.live-load": "false"}, false)
	n := le.planningNode(nodeOptions{planBatch: 1})
	le.commitRound(5)
	p := le.planner(n)
	ans := p.plan(`{}`)
	first := paths(p.all(ans))
	planned := le.metaKey
	le.commitRound(5)
	// The first commit's metadata leaves the metadata log and is collected; its
	// snapshot is still the committed metadata's.
	if _, err := le.db.Exec(le.ctx, `DELETE FROM mink_meta_files WHERE key = $1`, planned); err != nil {
		t.Fatal(err)
	}
	if got := paths(p.all(ans)); !slices.Equal(got, first) {
		t.Fatalf("after the metadata file went: %v, want %v", got, first)
	}
	code, body := p.do(http.MethodGet, "/plan/"+ans.PlanID, "")
	if code != http.StatusOK {
		t.Fatalf("GET plan after the metadata file went: %d %s", code, body)
	}

	// A live load's plan: its snapshot is in the load alone.
	if _, err := le.db.Exec(le.ctx, `UPDATE mink_tables SET properties = '{}' WHERE id = $1`, le.table.ID); err != nil {
		t.Fatal(err)
	}
	le.produce(5)
	live := p.plan(`{}`)
	if n := len(p.all(live)); n != 6 {
		t.Fatalf("the live plan has %d files, want 6 (two commits and a tail)", n)
	}
	if _, err := le.db.Exec(le.ctx, `UPDATE mink_meta_files SET expires_at = now() - interval '1 second' WHERE table_id = $1 AND expires_at IS NOT NULL`, le.table.ID); err != nil {
		t.Fatal(err)
	}
	p.fails(http.MethodPost, "/tasks", `{"plan-task": "`+live.PlanTasks[0]+`"}`, http.StatusNotFound, "NoSuchPlanTaskException", "is gone")
	p.fails(http.MethodGet, "/plan/"+live.PlanID, "", http.StatusNotFound, "NoSuchPlanIdException", "is gone")
}

// Planning is authorized as a load: 401 without credentials, 403 for a table the
// principal may not read (whatever else the request says), and for one it may, the
// plan with S3 credentials scoped to the table when asked; iceberg-go reads every row
// with those.
func TestPlanIsAuthorizedAsALoad(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	le := newLiveEnv(t, nil, false)
	a, err := auth.New(&auth.File{ClusterSecret: catClusterSecret, Principals: []auth.PrincipalConfig{
		{ID: "etl", Secret: catEtlSecret, Role: auth.RoleReader, Tables: []string{"default.clicks"}},
		{ID: "nosy", Secret: catOpsSecret, Role: auth.RoleReader, Tables: []string{"default.orders"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := le.planningNode(nodeOptions{auth: a, planBatch: 1})
	le.commitRound(5)
	le.produce(3)
	// nosy's table, so that nosy sees the namespace (else it is absent to nosy: 404).
	le.addTable("orders")

	etl := le.planner(n)
	etl.header = map[string]string{"Authorization": "Bearer " + catEtlSecret}
	ans := etl.plan(`{}`)
	if len(ans.StorageCredentials) != 0 {
		t.Fatalf("credentials nobody asked for: %+v", ans.StorageCredentials)
	}
	anon := le.planner(n)
	nosy := le.planner(n)
	nosy.header = map[string]string{"Authorization": "Bearer " + catOpsSecret}
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/plan", `{}`},
		{http.MethodPost, "/plan", `{"filter": {"type": "bogus"}}`},
		{http.MethodGet, "/plan/" + ans.PlanID, ""},
		{http.MethodGet, "/plan/garbage", ""},
		{http.MethodDelete, "/plan/" + ans.PlanID, ""},
		{http.MethodPost, "/tasks", `{"plan-task": "` + ans.PlanTasks[0] + `"}`},
		{http.MethodPost, "/tasks", `{}`},
	} {
		anon.fails(c.method, c.path, c.body, http.StatusUnauthorized, "NotAuthorizedException", "no credentials")
		nosy.fails(c.method, c.path, c.body, http.StatusForbidden, "ForbiddenException", `principal "nosy" may not read table default.clicks`)
	}

	etl.header[("X-Iceberg-Access-Delegation")] = "vended-credentials"
	code, body := etl.do(http.MethodPost, "/plan", `{}`)
	var vended planAnswer
	if err := json.Unmarshal(body, &vended); err != nil || code != http.StatusOK || len(vended.StorageCredentials) != 1 {
		t.Fatalf("plan with vended credentials: %d %s", code, body)
	}
	if sc := vended.StorageCredentials[0]; sc.Prefix != "s3://mink/default/clicks/" || sc.Config["s3.session-token"] == "" {
		t.Fatalf("credentials %+v", sc)
	}

	// iceberg-go, which asks for vended credentials and has no S3 keys of its own.
	cat, err := rest.NewCatalog(le.ctx, "mink", n.catalog, rest.WithCredential("etl:"+catEtlSecret))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	tbl, err := cat.LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan(table.WithScanPlanningMode(table.ScanPlanningRemote)).ToArrowTable(le.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	sameRows(t, "remote plan with vended credentials", rowsOf(t, at), le.rows)
}

// With Postgres down a plan is a 503 naming it, as a load is, and its plan tasks too
// (never a 404: they are not gone); once Postgres answers, the same plan tasks are
// answered, without a restart.
func TestPlanDuringPostgresOutage(t *testing.T) {
	e := newEnv(t, envOptions{privatePostgres: true})
	n := e.startNode("fs-a", nodeOptions{planBatch: 2})
	e.waitMembers([]*node{n})
	p := planner{t: t, base: n.catalog + "/v1/namespaces/" + ns + "/tables/" + tableName}
	ans := p.plan(`{"filter": {"type": "gt", "term": "id", "value": 3}}`)
	want := paths(p.all(ans))
	if len(want) != len(e.files) || len(ans.PlanTasks) == 0 {
		t.Fatalf("planned %d files in %d plan tasks, want %d files in some", len(want), len(ans.PlanTasks), len(e.files))
	}
	if err := e.pg.Stop(); err != nil {
		t.Fatal(err)
	}
	p.fails(http.MethodPost, "/plan", `{}`, http.StatusServiceUnavailable, "ServiceUnavailableException", "postgres")
	p.fails(http.MethodPost, "/tasks", `{"plan-task": "`+ans.PlanTasks[0]+`"}`, http.StatusServiceUnavailable, "ServiceUnavailableException", "postgres")
	p.fails(http.MethodGet, "/plan/"+ans.PlanID, "", http.StatusServiceUnavailable, "ServiceUnavailableException", "postgres")
	if err := e.pg.Start(); err != nil {
		t.Fatal(err)
	}
	leasetest.Eventually(t, 20*time.Second, "plans to work again", func() bool {
		code, _ := p.do(http.MethodPost, "/tasks", `{"plan-task": "`+ans.PlanTasks[0]+`"}`)
		return code == http.StatusOK
	})
	if got := paths(p.all(ans)); !slices.Equal(got, want) {
		t.Fatalf("after the outage: %v, want %v", got, want)
	}
}

// A filter fixing _kafka_partition (=, IN, a range) plans only that partition's files,
// and iceberg-go's remote scan reads exactly its rows: committed files and the live
// tail's alike.
func TestPlanPrunesByPartition(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, nil, false)
	n := le.planningNode(nodeOptions{})
	le.commitRound(10)
	le.commitRound(10)
	le.produce(5) // the tail

	pa := le.planner(n)
	all := pa.all(pa.plan(`{}`))
	partOf := map[string]string{}
	for _, task := range all {
		if len(task.DataFile.Partition) != 1 {
			t.Fatalf("%s: partition %s, want the Kafka partition", task.DataFile.FilePath, task.DataFile.Partition)
		}
		partOf[task.DataFile.FilePath] = string(task.DataFile.Partition[0])
	}
	if len(all) != 2*3 {
		t.Fatalf("%d files, want 6 (2 commits and a tail, 2 partitions)", len(all))
	}

	tbl, err := le.catalogClient(n).LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		t.Fatal(err)
	}
	kp := iceberg.Reference("_kafka_partition")
	for _, c := range []struct {
		filter string
		expr   iceberg.BooleanExpression
		want   int32
	}{
		{`{"type": "eq", "term": "_kafka_partition", "value": 1}`, iceberg.EqualTo(kp, int32(1)), 1},
		{`{"type": "in", "term": "_kafka_partition", "values": [0]}`, iceberg.IsIn(kp, int32(0)), 0},
		{`{"type": "gt-eq", "term": "_kafka_partition", "value": 1}`, iceberg.GreaterThanEqual(kp, int32(1)), 1},
		{`{"type": "and", "left": {"type": "gt", "term": "_kafka_partition", "value": -1}, "right": {"type": "lt", "term": "_kafka_partition", "value": 1}}`,
			iceberg.NewAnd(iceberg.GreaterThan(kp, int32(-1)), iceberg.LessThan(kp, int32(1))), 0},
	} {
		planned := pa.all(pa.plan(`{"filter": ` + c.filter + `}`))
		var want []string
		for path, p := range partOf {
			if p == fmt.Sprint(c.want) {
				want = append(want, path)
			}
		}
		slices.Sort(want)
		if got := paths(planned); !slices.Equal(got, want) {
			t.Fatalf("filter %s: planned\n%v\nwant the files of partition %d\n%v", c.filter, got, c.want, want)
		}
		for _, task := range planned {
			if string(task.Residual) != "true" {
				t.Errorf("filter %s: %s has residual %s, want true", c.filter, task.DataFile.FilePath, task.Residual)
			}
		}

		at, err := tbl.Scan(table.WithRowFilter(c.expr), table.WithScanPlanningMode(table.ScanPlanningRemote)).ToArrowTable(le.ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := rowsOf(t, at)
		at.Release()
		var rows []row
		for _, r := range le.rows {
			if r.partition == c.want {
				rows = append(rows, r)
			}
		}
		sameRows(t, "remote scan of "+c.filter, got, rows)
	}
}

// A table stored with a spec Mink does not index by yet (by a newer node) is not
// indexed, so its loads have no live tail: they answer its committed metadata, never a
// tail by _kafka_partition under a spec that says otherwise.
func TestLiveLoadOfAnUnindexedSpec(t *testing.T) {
	t.Parallel()
	le := newLiveEnv(t, nil, false)
	n := le.planningNode(nodeOptions{})
	le.commitRound(5)
	le.produce(3) // a tail the default table's loads show
	schema, err := spec.IcebergSchema()
	if err != nil {
		t.Fatal(err)
	}
	by, err := partition.ParseList("bucket[4](id)")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := partition.Build(schema, by, nil)
	if err != nil {
		t.Fatal(err)
	}
	le.addTableSpec("bucketed", &ps)

	cat := le.catalogClient(n)
	def, err := cat.LoadTable(le.ctx, table.Identifier{ns, le.name})
	if err != nil {
		t.Fatal(err)
	}
	if s := def.Metadata().CurrentSnapshot(); s == nil || s.Summary.Properties[live.SummaryLive] != "true" {
		t.Fatalf("the default table's load is not live: %+v", s)
	}
	got, err := cat.LoadTable(le.ctx, table.Identifier{ns, "bucketed"})
	if err != nil {
		t.Fatalf("load of the table partitioned by bucket[4](id): %v", err)
	}
	if got.MetadataLocation() != layout.URI(le.metaKey) {
		t.Fatalf("the load answers %s, want the committed metadata %s", got.MetadataLocation(), layout.URI(le.metaKey))
	}
}
