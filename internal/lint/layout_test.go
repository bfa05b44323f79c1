package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the module's root, two folders above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// packageDirs lists every folder under root holding Go files, as slash paths relative to
// root; testdata, hidden folders and node_modules are skipped as the go tool skips them.
func packageDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(p))
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			if !slices.Contains(dirs, rel) {
				dirs = append(dirs, rel)
			}
		}
		return nil
	})
	return dirs, err
}

var layoutPath = regexp.MustCompile("`([^`]+)`")

// layoutNames is every backquoted path in the first column of the README's Layout table.
func layoutNames(readme string) map[string]bool {
	names := map[string]bool{}
	_, table, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		return names
	}
	if i := strings.Index(table, "\n## "); i >= 0 {
		table = table[:i]
	}
	for line := range strings.SplitSeq(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range layoutPath.FindAllStringSubmatch(cells[1], -1) {
			names[m[1]] = true
		}
	}
	return names
}

// unlisted is the packages the Layout table does not name, and the names in it that are
// no package and no file or folder of the tree.
func unlisted(root, readme string) (missing, stale []string, err error) {
	dirs, err := packageDirs(root)
	if err != nil {
		return nil, nil, err
	}
	names := layoutNames(readme)
	for _, d := range dirs {
		if !names[d] {
			missing = append(missing, d)
		}
	}
	for n := range names {
		path := strings.TrimSuffix(strings.TrimSuffix(n, "..."), "/")
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(path))); err != nil {
			stale = append(stale, n)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	return missing, stale, nil
}

// TestLayoutNamesEveryPackage keeps the README's Layout table whole: a new package gets a
// row (or a place in one) saying what it holds, and a moved one leaves no stale name.
func TestLayoutNamesEveryPackage(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	missing, stale, err := unlisted(root, string(readme))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range missing {
		t.Errorf("package %s is not in the README's Layout table: add it to the row of its concern", d)
	}
	for _, n := range stale {
		t.Errorf("the README's Layout table names %s, which is not in the tree", n)
	}
}

// TestLayoutRuleFails shows the rule on a tree of its own: an unnamed package and a stale
// name are both found.
func TestLayoutRuleFails(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"pkg/a", "pkg/b"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "x.go"), []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	readme := "# x\n\n## Layout\n\n| path | what |\n|---|---|\n| `pkg/a`, `pkg/gone` | things |\n\n## After\n\n| `pkg/b` | not the table |\n"
	missing, stale, err := unlisted(root, readme)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(missing, []string{"pkg/b"}) || !slices.Equal(stale, []string{"pkg/gone"}) {
		t.Fatalf("missing %v, stale %v; want [pkg/b] and [pkg/gone]", missing, stale)
	}
}

// maxDocLines is how long a package doc may be: what the package holds and why, in a few
// lines; design notes go to docs/.
const maxDocLines = 10

// longDocs is the package docs (file and line count) longer than maxDocLines.
func longDocs(root string) (map[string]int, error) {
	dirs, err := packageDirs(root)
	if err != nil {
		return nil, err
	}
	long := map[string]int{}
	for _, d := range dirs {
		names, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(d), "*.go"))
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				return nil, err
			}
			if f.Doc == nil {
				continue
			}
			if n := len(strings.Split(strings.TrimSpace(f.Doc.Text()), "\n")); n > maxDocLines {
				rel, _ := filepath.Rel(root, name)
				long[filepath.ToSlash(rel)] = n
			}
		}
	}
	return long, nil
}

// pendingSplit is the files whose package docs are cut when they are split (issue 28),
// exempt until then; remove each entry with its file's split.
var pendingSplit = map[string]bool{}

// TestPackageDocsAreShort keeps package docs to what a package holds and why.
func TestPackageDocsAreShort(t *testing.T) {
	long, err := longDocs(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for f, n := range long {
		if pendingSplit[f] {
			continue
		}
		t.Errorf("%s: the package doc is %d lines; keep it to %d (what the package holds and why) and move design notes to docs/", f, n, maxDocLines)
	}
}

// TestDocRuleFails shows the doc rule finds a long package doc and passes a short one.
func TestDocRuleFails(t *testing.T) {
	root := t.TempDir()
	write := func(dir, text string) {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, dir, "doc.go"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("short", "// Package short holds a thing.\npackage short\n")
	write("long", "// Package long is an essay.\n"+strings.Repeat("//\n// More.\n", maxDocLines)+"package long\n")
	long, err := longDocs(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) != 1 || long["long/doc.go"] == 0 {
		t.Fatalf("long docs %v; want long/doc.go only", long)
	}
}
