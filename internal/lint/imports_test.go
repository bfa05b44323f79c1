package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The import rules: a role (services/<role>/...) never imports another role's packages,
// its config included, since what roles share lives in pkg/; pkg/ never imports
// services/, since a library the roles share cannot depend on one of them. cmd/ and the
// test harnesses may import anything. Test files count as their package's imports.
func TestImportRules(t *testing.T) {
	module, pkgs := goList(t, "../..")
	roles := map[string]bool{}
	for _, p := range pkgs {
		if r, ok := role(module, p.ImportPath); ok {
			roles[r] = true
		}
	}
	if len(roles) < 3 {
		t.Fatalf("found the roles %v in %d packages, want indexer, writer and fileserver: the rules would check nothing", roles, len(pkgs))
	}
	for _, v := range importViolations(module, pkgs) {
		t.Error(v)
	}
}

// Each rule fails on a fixture module that breaks it (testdata/imports): a role
// importing another role's config, a role's test doing so, and pkg/ importing a role;
// what the rules allow (a role's own packages, cmd/ importing roles) passes.
func TestImportRulesFailOnViolations(t *testing.T) {
	module, pkgs := goList(t, "testdata/imports")
	got := importViolations(module, pkgs)
	want := []string{
		"example.com/fixture/pkg/shared imports example.com/fixture/services/alpha/config: pkg/ never imports services/ (a library the roles share cannot depend on a role)",
		"example.com/fixture/services/beta imports example.com/fixture/services/alpha/config: role beta imports role alpha (what roles share lives in pkg/)",
		"example.com/fixture/services/beta/internal/b imports example.com/fixture/services/alpha: role beta imports role alpha (what roles share lives in pkg/)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations in the fixture:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// listed is a package as `go list -json` describes it: the fields the rules read.
type listed struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// goList lists the packages of the module in dir (`go list -json ./...`) and returns
// the module's path with them.
func goList(t *testing.T, dir string) (string, []listed) {
	t.Helper()
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
		}
		return out
	}
	module := strings.TrimSpace(string(run("list", "-m")))
	dec := json.NewDecoder(bytes.NewReader(run("list", "-json", "./...")))
	var pkgs []listed
	for {
		var p listed
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go list -json in %s: %v", dir, err)
		}
		pkgs = append(pkgs, p)
	}
	return module, pkgs
}

// importViolations is every import of pkgs, test files' included, that a rule forbids,
// sorted.
func importViolations(module string, pkgs []listed) []string {
	var out []string
	for _, p := range pkgs {
		imports := slices.Concat(p.Imports, p.TestImports, p.XTestImports)
		slices.Sort(imports)
		for _, imp := range slices.Compact(imports) {
			if why := forbidden(module, p.ImportPath, imp); why != "" {
				out = append(out, fmt.Sprintf("%s imports %s: %s", p.ImportPath, imp, why))
			}
		}
	}
	slices.Sort(out)
	return out
}

// forbidden says why from may not import to, or "" when it may.
func forbidden(module, from, to string) string {
	toRole, toService := role(module, to)
	if !toService {
		return ""
	}
	if fromRole, ok := role(module, from); ok {
		if fromRole != toRole {
			return fmt.Sprintf("role %s imports role %s (what roles share lives in pkg/)", fromRole, toRole)
		}
		return ""
	}
	if rel, ok := strings.CutPrefix(from, module+"/"); ok && (rel == "pkg" || strings.HasPrefix(rel, "pkg/")) {
		return "pkg/ never imports services/ (a library the roles share cannot depend on a role)"
	}
	return ""
}

// role is the role a package of the module belongs to: <role> of services/<role>/...
func role(module, path string) (string, bool) {
	rel, ok := strings.CutPrefix(path, module+"/services/")
	if !ok || rel == "" {
		return "", false
	}
	r, _, _ := strings.Cut(rel, "/")
	return r, true
}
