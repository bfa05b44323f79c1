package deploytest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const dockerfilePath = "deploy/Dockerfile"

// instr is one Dockerfile instruction, continuation lines joined.
type instr struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
	line int
}

type stage struct {
	name   string // the AS name, lower case; "" when unnamed
	base   string // the FROM image (ARG defaults substituted) or an earlier stage's name
	line   int
	instrs []instr
}

type dockerfile struct {
	args   map[string]string // ARG defaults before the first FROM
	stages []*stage
}

func parseDockerfile(path string) (*dockerfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ins []instr
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue // comments (also inside continuations) and blank lines
		}
		if cur.Len() == 0 {
			start = n
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			continue
		}
		cmd, args, _ := strings.Cut(text, " ")
		ins = append(ins, instr{strings.ToUpper(cmd), strings.TrimSpace(args), start})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	d := &dockerfile{args: map[string]string{}}
	for _, in := range ins {
		switch {
		case in.cmd == "ARG" && len(d.stages) == 0:
			for _, a := range strings.Fields(in.args) {
				k, v, _ := strings.Cut(a, "=")
				d.args[k] = strings.Trim(v, `"`)
			}
		case in.cmd == "FROM":
			var words []string
			for _, w := range strings.Fields(in.args) {
				if !strings.HasPrefix(w, "--") {
					words = append(words, w)
				}
			}
			if len(words) == 0 {
				return nil, fmt.Errorf("line %d: FROM without an image", in.line)
			}
			s := &stage{base: d.expand(words[0]), line: in.line}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				s.name = strings.ToLower(words[2])
			}
			d.stages = append(d.stages, s)
		case len(d.stages) == 0:
			return nil, fmt.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
		default:
			st := d.stages[len(d.stages)-1]
			st.instrs = append(st.instrs, in)
		}
	}
	return d, nil
}

var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

func (d *dockerfile) expand(s string) string {
	return argRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := d.args[argRef.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return m
	})
}

func (d *dockerfile) stage(name string) *stage {
	for _, s := range d.stages {
		if s.name != "" && s.name == strings.ToLower(name) {
			return s
		}
	}
	return nil
}

// chain is a target's stage and the stages it is built on, the target first.
func (d *dockerfile) chain(target string) []*stage {
	var out []*stage
	for s := d.stage(target); s != nil && len(out) < len(d.stages); s = d.stage(s.base) {
		out = append(out, s)
	}
	return out
}

// last is the last instruction cmd in a target's chain (the one in effect), or nil.
func last(chain []*stage, cmd string) *instr {
	for _, s := range chain {
		for i := len(s.instrs) - 1; i >= 0; i-- {
			if s.instrs[i].cmd == cmd {
				return &s.instrs[i]
			}
		}
	}
	return nil
}

// copied maps each path a target's chain copies from another stage to that stage and
// source: "/usr/local/bin/minkctl" -> {"build", "/out/minkctl"}.
func copied(chain []*stage) map[string][2]string {
	out := map[string][2]string{}
	for i := len(chain) - 1; i >= 0; i-- {
		for _, in := range chain[i].instrs {
			if in.cmd != "COPY" {
				continue
			}
			var from string
			var words []string
			for _, w := range strings.Fields(in.args) {
				if v, ok := strings.CutPrefix(w, "--from="); ok {
					from = strings.ToLower(v)
				} else if !strings.HasPrefix(w, "--") {
					words = append(words, w)
				}
			}
			if from == "" || len(words) != 2 {
				continue
			}
			dst := words[1]
			if strings.HasSuffix(dst, "/") {
				dst += filepath.Base(words[0])
			}
			out[dst] = [2]string{from, words[0]}
		}
	}
	return out
}

// goBuilds finds, in a stage's RUN instructions, each `go build ... -o OUT PKG`: OUT -> PKG.
var goBuild = regexp.MustCompile(`go build\b[^;&|]*?\s-o\s+(\S+)\s+(\./[A-Za-z0-9_./-]+)`)

func goBuilds(s *stage) map[string]string {
	out := map[string]string{}
	for _, in := range s.instrs {
		if in.cmd != "RUN" {
			continue
		}
		for _, m := range goBuild.FindAllStringSubmatch(in.args, -1) {
			out[m[1]] = strings.TrimPrefix(m[2], "./")
		}
	}
	return out
}

// loadDockerfile parses deploy/Dockerfile, failing the test when it cannot.
func loadDockerfile(t *testing.T, root string) *dockerfile {
	t.Helper()
	d, err := parseDockerfile(filepath.Join(root, dockerfilePath))
	if err != nil {
		t.Fatalf("%s: %v", dockerfilePath, err)
	}
	return d
}

func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	d := loadDockerfile(t, root)

	// The build stage: the Go of go.mod, a module cache mount, every binary built from a
	// main package that exists.
	var build *stage
	for _, s := range d.stages {
		if len(goBuilds(s)) > 0 {
			build = s
		}
	}
	if build == nil {
		t.Fatalf("%s: no stage runs `go build -o OUT ./PKG`", dockerfilePath)
	}
	goVersion := goModVersion(t, root)
	if img, tag, _ := strings.Cut(build.base, ":"); img != "golang" || !strings.HasPrefix(tag, goVersion) {
		t.Errorf("%s:%d: build stage FROM %s: want golang:%s (go.mod says go %s)", dockerfilePath, build.line, build.base, goVersion, goVersion)
	}
	var cacheMount bool
	for _, in := range build.instrs {
		if in.cmd == "RUN" && strings.Contains(in.args, "--mount=type=cache,target=/go/pkg/mod") {
			cacheMount = true
		}
	}
	if !cacheMount {
		t.Errorf("%s: build stage %q: no RUN --mount=type=cache,target=/go/pkg/mod (module cache)", dockerfilePath, build.name)
	}
	outputs := goBuilds(build)
	for out, pkg := range outputs {
		checkMainPackage(t, root, fmt.Sprintf("%s: go build -o %s ./%s", dockerfilePath, out, pkg), pkg)
	}

	// One target per program: its binary, built from its package, as the entrypoint;
	// minkctl beside it; a non-root user; SIGTERM; a health check for the roles.
	for _, p := range programs {
		where := fmt.Sprintf("%s: target %s", dockerfilePath, p.target)
		chain := d.chain(p.target)
		if len(chain) == 0 {
			t.Errorf("%s: no stage named %q (docker build --target %s)", where, p.target, p.target)
			continue
		}
		files := copied(chain)
		ep := last(chain, "ENTRYPOINT")
		if ep == nil {
			t.Errorf("%s: no ENTRYPOINT", where)
			continue
		}
		var argv []string
		if err := json.Unmarshal([]byte(ep.args), &argv); err != nil || len(argv) == 0 {
			t.Errorf("%s:%d: ENTRYPOINT %s: want the exec form [\"/path/binary\"], so the binary is PID 1 and gets SIGTERM", dockerfilePath, ep.line, ep.args)
			continue
		}
		want := map[string]string{argv[0]: p.pkg}
		if p.role != "" {
			want["/usr/local/bin/minkctl"] = "cmd/minkctl"
		}
		for path, pkg := range want {
			src, ok := files[path]
			switch {
			case !ok:
				t.Errorf("%s: %s is not copied into the image from the build stage", where, path)
			case src[0] != build.name:
				t.Errorf("%s: %s is copied from stage %q, not the build stage %q", where, path, src[0], build.name)
			case outputs[src[1]] != pkg:
				t.Errorf("%s: %s comes from %s, built from %q; want ./%s", where, path, src[1], outputs[src[1]], pkg)
			}
		}
		if base := chain[len(chain)-1].base; strings.HasPrefix(base, "golang") {
			t.Errorf("%s: runs on %s; want a small runtime image (distroless or debian-slim)", where, base)
		}
		if u := last(chain, "USER"); u != nil && isRoot(u.args) || u == nil && !strings.Contains(chain[len(chain)-1].base, "nonroot") {
			t.Errorf("%s: runs as root; want a USER that is not root (65532, distroless nonroot)", where)
		}
		// The auth config's folder, owned by the nodes' user: a fresh named volume mounted
		// there takes its owner, so minkctl auth init may write it and the nodes read it.
		if !chownedDir(chain, authDir) {
			t.Errorf("%s: no %s owned by 65532 (COPY --chown=65532:65532 of an empty folder); a volume mounted there would be root's", where, authDir)
		}
		if p.role == "" {
			continue
		}
		if s := last(chain, "STOPSIGNAL"); s == nil || s.args != "SIGTERM" {
			t.Errorf("%s: want STOPSIGNAL SIGTERM (the node's clean stop)", where)
		}
		if h := last(chain, "HEALTHCHECK"); h == nil || strings.HasPrefix(strings.ToUpper(h.args), "NONE") {
			t.Errorf("%s: no HEALTHCHECK", where)
		} else if strings.Contains(h.args, "minkctl") && !strings.Contains(h.args, `"health"`) {
			t.Errorf("%s:%d: HEALTHCHECK %s: with auth on only `minkctl health` (grpc.health.v1) answers a check without credentials", dockerfilePath, h.line, h.args)
		}
	}

	checkDockerignore(t, root)
}

// authDir is where the images keep the auth config's folder (MINK_AUTH_CONFIG's).
const authDir = "/etc/mink/auth"

// chownedDir reports whether the chain copies a folder to dir owned by the nodes' user.
func chownedDir(chain []*stage, dir string) bool {
	for _, s := range chain {
		for _, in := range s.instrs {
			if in.cmd == "COPY" && strings.Contains(in.args, "--chown=65532:65532") && strings.HasSuffix(strings.TrimSpace(in.args), " "+dir) {
				return true
			}
		}
	}
	return false
}

func isRoot(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	return u == "root" || u == "0"
}

// goModVersion is go.mod's go directive as major.minor ("1.26").
func goModVersion(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	return string(m[1])
}

func checkMainPackage(t *testing.T, root, where, pkg string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, pkg))
	if err != nil {
		t.Errorf("%s: package directory %s: %v", where, pkg, err)
		return
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), "_test.go") {
			b, err := os.ReadFile(filepath.Join(root, pkg, e.Name()))
			if err == nil && regexp.MustCompile(`(?m)^package main\s*$`).Match(b) {
				return
			}
		}
	}
	t.Errorf("%s: %s is not a main package", where, pkg)
}

// checkDockerignore checks that deploy/Dockerfile.dockerignore (BuildKit's ignore file for
// that Dockerfile) keeps every file the build needs: go.mod, go.sum, the non-test Go
// sources of the module and the SQL migrations they embed.
func checkDockerignore(t *testing.T, root string) {
	t.Helper()
	const name = dockerfilePath + ".dockerignore"
	b, err := os.ReadFile(filepath.Join(root, name))
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var patterns []*regexp.Regexp
	var raw []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		patterns = append(patterns, ignorePattern(line))
		raw = append(raw, line)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, dir := range []string{"cmd", "gen", "pkg", "services"} {
		filepath.WalkDir(filepath.Join(root, dir), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			if (strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") && !strings.Contains(rel, "/testdata/")) ||
				strings.HasPrefix(rel, "pkg/pgschema/migrations/") {
				needed = append(needed, filepath.ToSlash(rel))
			}
			return nil
		})
	}
	for _, f := range needed {
		for i, re := range patterns {
			if re.MatchString(f) {
				t.Errorf("%s: pattern %q excludes %s, which the build needs", name, raw[i], f)
				break
			}
		}
	}
}

// ignorePattern compiles a .dockerignore pattern: it matches a path or any path below it.
func ignorePattern(p string) *regexp.Regexp {
	p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case strings.HasPrefix(p[i:], "**/"):
			re.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			re.WriteString(".*")
			i++
		case c == '*':
			re.WriteString("[^/]*")
		case c == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("(/.*)?$")
	return regexp.MustCompile(re.String())
}
