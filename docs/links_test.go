// Package docs holds the reference pages the README links; its test keeps the links true.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Every relative link in README.md, docs/*.md and docs/design/*.md names a file that
// exists and, with a #fragment, a heading of it (as GitHub makes anchors of headings).
func TestLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	design, err := filepath.Glob(filepath.Join("design", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(append(pages, design...), filepath.Join("..", "README.md"))
	if len(pages) < 2 || len(design) == 0 {
		t.Fatalf("pages %v: want README.md, docs/*.md and docs/design/*.md", pages)
	}
	anchors := map[string]map[string]bool{} // cleaned path → its anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path]
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			links++
			path, frag, _ := strings.Cut(l.target, "#")
			target := filepath.Clean(page)
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(page), path))
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s:%d: [%s](%s): %s does not exist", page, l.line, l.text, l.target, target)
				continue
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: [%s](%s): a #fragment of a file that is not Markdown", page, l.line, l.text, l.target)
				continue
			}
			if !anchorsOf(target)[frag] {
				t.Errorf("%s:%d: [%s](%s): %s has no heading #%s", page, l.line, l.text, l.target, target, frag)
			}
		}
	}
	if links < 50 {
		t.Errorf("%d relative links in %v: the parser finds too few", links, pages)
	}
}

// Every README section another file cites by name (`README, "Upsert tables"`: in
// comments, messages, the banner, configs) is a heading of the README or the text of one
// of its links, so the README stays the index of what moved to docs/.
func TestCitedSectionsAreInTheREADME(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	names := map[string]bool{}
	for _, l := range markdownLinks(readme) {
		names[l.text] = true
	}
	for _, h := range headings(readme) {
		names[h] = true
	}
	cite := regexp.MustCompile(`README, \\?"([^"\\]+)\\?"`)
	continuation := regexp.MustCompile(`\s*\n\s*(//|#|--)?\s*`)
	cited := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == ".tmp" || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Clean(path) == filepath.Join("..", "README.md") {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > 1<<20 || !d.Type().IsRegular() {
			return err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range cite.FindAllStringSubmatch(string(text), -1) {
			name := continuation.ReplaceAllString(m[1], " ")
			cited++
			if !names[name] {
				t.Errorf("%s cites the README's %q, which is neither a heading nor a link of the README", path, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 5 {
		t.Errorf("%d citations of README sections found: the walk finds too few", cited)
	}
}

type link struct {
	text, target string
	line         int
}

var linkRE = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)

// markdownLinks are the inline links of doc outside fenced code blocks and code spans,
// their text on one line or wrapped over two.
func markdownLinks(doc string) []link {
	var out []link
	prose := proseLines(doc)
	for i := range prose {
		prose[i] = codeSpan.ReplaceAllString(prose[i], "")
	}
	for i, l := range prose {
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			out = append(out, link{text: m[1], target: m[2], line: i + 1})
		}
		if i+1 == len(prose) {
			continue
		}
		// Only the links that begin on this line and end on the next.
		pair := l + " " + prose[i+1]
		for _, m := range linkRE.FindAllStringSubmatchIndex(pair, -1) {
			if m[0] < len(l) && m[1] > len(l)+1 {
				out = append(out, link{text: strings.Join(strings.Fields(pair[m[2]:m[3]]), " "), target: pair[m[4]:m[5]], line: i + 1})
			}
		}
	}
	return out
}

var codeSpan = regexp.MustCompile("`[^`]*`")

// proseLines is doc with the lines of fenced code blocks blanked, line numbers kept.
func proseLines(doc string) []string {
	lines := strings.Split(doc, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// headings are the texts of doc's ATX headings, code spans unwrapped.
func headings(doc string) []string {
	var out []string
	for _, l := range proseLines(doc) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		out = append(out, strings.ReplaceAll(h, "`", ""))
	}
	return out
}

// headingAnchors are the anchors GitHub gives doc's headings: lower case, punctuation
// dropped, spaces made hyphens, a repeated one suffixed -1, -2, ...
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings(doc) {
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '_', r == '-':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
