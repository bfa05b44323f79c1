package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The rule "SQL only in stores and migrations": every statement that names a Mink table
// is in the one store package that owns the table. A store reads another store's table
// only where crossReads says why (a join that must be one statement), and never writes
// it. The migrations (pkg/pgschema) create the tables. Statements that name no Mink
// table are allowed only where noTables says why. Tests, test helpers and the benchmark
// harness inspect and set up Postgres directly and are left out: _test.go files, and the
// packages in harness.
var sqlRules = sqlConfig{
	owners: map[string][]string{
		"pkg/lease":    {"mink_members", "mink_leases", "mink_retired", "mink_left", "mink_generations", "mink_lease_holders"},
		"pkg/tables":   {"mink_tables", "mink_table_versions", "mink_registry_schemas"},
		"pkg/ranges":   {"mink_partitions", "mink_ranges", "mink_version_points"},
		"pkg/objects":  {"mink_data_files", "mink_meta_files", "mink_table_meta", "mink_file_problems", "mink_removed_files"},
		"pkg/pgschema": {"mink_schema_migrations"},
	},
	crossReads: map[string]string{
		"pkg/lease mink_tables":      "the scopes leases are cut from: a round reads the tables' ids and partition counts, and names the leases it takes in the statement that takes them",
		"pkg/tables mink_table_meta": "a catalog listing pages through the tables that have a commit, in one keyset query",
		"pkg/ranges mink_tables":     "a partition without ranges is idle since its table was created, read in the statement that reads the partitions",
	},
	noTables: map[string]string{
		"pkg/pg":         "the database clock and LISTEN",
		"pkg/devcluster": "the make dev launcher creates its database on the server it starts, and prints the SQL other engines (DuckDB, Spark) run against Mink",
	},
	harness:    []string{"pkg/pgtest", "pkg/lease/leasetest", "test", "bench"},
	migrations: "pkg/pgschema/migrations",
	// Statements not yet moved to the store that owns their tables: none left, and
	// nothing may be added.
	pending: map[string]bool{},
}

func TestSQLOnlyInStores(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range sqlRules.check(root) {
		t.Error(v)
	}
}

// The rule fails on SQL outside a store, on a store writing or reading another store's
// table, and on a table without an owner; it passes tests, harnesses, allowed reads and
// the statements still to move (pending).
func TestSQLRuleOnFixture(t *testing.T) {
	fixture := sqlConfig{
		owners: map[string][]string{
			"pkg/a":        {"mink_a"},
			"pkg/b":        {"mink_b"},
			"pkg/pgschema": nil,
		},
		crossReads: map[string]string{"pkg/b mink_a": "a join the fixture allows"},
		noTables:   map[string]string{"pkg/c": "statements that name no table"},
		harness:    []string{"test"},
		migrations: "pkg/pgschema/migrations",
		pending:    map[string]bool{"pkg/d mink_a": true},
	}
	got := fixture.check("testdata/sql")
	want := []string{
		"pkg/a/a.go:8: pkg/a reads mink_b, a table of pkg/b: call pkg/b",
		"pkg/a/a.go:9: pkg/a writes mink_b, a table of pkg/b: call pkg/b",
		"pkg/b/b.go:9: pkg/b writes mink_a, a table of pkg/a: call pkg/a",
		"pkg/c/c.go:6: SQL outside a store: pkg/b owns mink_b",
		"pkg/pgschema/migrations: table mink_c has no owner among the stores",
		"services/x/x.go:6: SQL outside a store: pkg/a owns mink_a",
		"services/x/x.go:7: SQL outside a store",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type sqlConfig struct {
	owners     map[string][]string // store package (its directory) -> the tables it owns
	crossReads map[string]string   // "<package> <table>" -> why that package reads another's table
	noTables   map[string]string   // package -> why it holds statements that name no Mink table
	harness    []string            // directories whose packages may hold any SQL
	migrations string              // the directory of the .sql migrations
	pending    map[string]bool     // "<package> <table>" ("<package> " for no table): violations still to fix
}

var (
	// A statement: a literal that begins with a statement's keywords, as Mink writes them
	// (upper case), or a fragment that names a table after FROM, JOIN, INTO or UPDATE.
	sqlStatement  = regexp.MustCompile(`^\s*(SELECT|INSERT\s+INTO|UPDATE\s+\w+|DELETE\s+FROM|WITH\s+\w+\s+AS|EXISTS\s*\(\s*SELECT|CREATE|ALTER|DROP|TRUNCATE|LISTEN|NOTIFY)\b`)
	sqlNamesTable = regexp.MustCompile(`\b(FROM|JOIN|INTO|UPDATE)\s+mink_\w+`)
	sqlTable      = regexp.MustCompile(`\bmink_\w+\b`)
	sqlCreated    = regexp.MustCompile(`(?i)CREATE\s+(?:OR\s+REPLACE\s+)?(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?(mink_\w+)`)
)

// check lists the violations of the rule in the tree at root, sorted.
func (c sqlConfig) check(root string) []string {
	var out []string
	owner := map[string]string{}
	for pkg, ts := range c.owners {
		for _, t := range ts {
			if o, dup := owner[t]; dup {
				out = append(out, fmt.Sprintf("table %s has two owners, %s and %s", t, o, pkg))
			}
			owner[t] = pkg
		}
	}
	created, err := c.tables(root)
	if err != nil {
		return []string{err.Error()}
	}
	for _, t := range created {
		if _, ok := owner[t]; !ok {
			out = append(out, fmt.Sprintf("%s: table %s has no owner among the stores", c.migrations, t))
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if n := d.Name(); rel != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "gen" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if c.isHarness(pkg) {
			return nil
		}
		vs, err := c.checkFile(path, rel, pkg, owner)
		out = append(out, vs...)
		return err
	})
	if err != nil {
		out = append(out, err.Error())
	}
	sort.Strings(out)
	return out
}

func (c sqlConfig) isHarness(pkg string) bool {
	for _, h := range c.harness {
		if pkg == h || strings.HasPrefix(pkg, h+"/") {
			return true
		}
	}
	return false
}

// tables are the tables and views the migrations create.
func (c sqlConfig) tables(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, c.migrations, "*.sql"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no migrations in %s: %v", c.migrations, err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range sqlCreated.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out, nil
}

func (c sqlConfig) checkFile(path, rel, pkg string, owner map[string]string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	_, store := c.owners[pkg]
	_, noTables := c.noTables[pkg]
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil || !sqlStatement.MatchString(s) && !sqlNamesTable.MatchString(s) {
			return true
		}
		at := fmt.Sprintf("%s:%d", rel, fset.Position(lit.Pos()).Line)
		if !store && noTables && !slices.ContainsFunc(uniqueTables(s), func(t string) bool { return owner[t] != "" }) {
			return true
		}
		if !store {
			hint := ""
			t := sqlTable.FindString(s)
			if owner[t] != "" {
				hint = fmt.Sprintf(": %s owns %s", owner[t], t)
			} else {
				t = ""
			}
			if !c.pending[pkg+" "+t] {
				out = append(out, fmt.Sprintf("%s: SQL outside a store%s", at, hint))
			}
			return true
		}
		for _, t := range uniqueTables(s) {
			o, known := owner[t]
			if !known || o == pkg || c.pending[pkg+" "+t] {
				continue // a function, a trigger or a channel of that name; its own table; or one still to move
			}
			switch {
			case writes(s, t):
				out = append(out, fmt.Sprintf("%s: %s writes %s, a table of %s: call %s", at, pkg, t, o, o))
			case c.crossReads[pkg+" "+t] == "":
				out = append(out, fmt.Sprintf("%s: %s reads %s, a table of %s: call %s", at, pkg, t, o, o))
			}
		}
		return true
	})
	return out, nil
}

func uniqueTables(s string) []string {
	var out []string
	for _, t := range sqlTable.FindAllString(s, -1) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// writes reports whether statement s inserts into, updates or deletes from table t.
func writes(s, t string) bool {
	return regexp.MustCompile(`\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM|TRUNCATE)\s+` + regexp.QuoteMeta(t) + `\b`).MatchString(s)
}
