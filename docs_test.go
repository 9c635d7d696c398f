package corral_test

import (
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The README is the entry page and the rest of the documentation lives
// under docs/: these tests keep the README short, the architecture page
// complete, and every link between the pages pointing at something.

// readmeMaxLines is how long the README may grow.
const readmeMaxLines = 300

// TestDocs checks the documentation of the tree at the module root.
func TestDocs(t *testing.T) {
	for _, p := range docProblems(t, ".") {
		t.Error(p)
	}
}

// TestDocsCanFail breaks each rule once in a small tree and expects each
// to be reported, so TestDocs is known to be able to fail.
func TestDocsCanFail(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                       "module corral\n",
		"corral.go":                    "package corral\n",
		"cmd/corral/main.go":           "package main\n",
		"internal/named/named.go":      "package named\n",
		"internal/unnamed/a.go":        "package unnamed\n",
		"internal/onlytests/x_test.go": "package onlytests\n",
		"internal/named/testdata/t.go": "package ignored\n",
		"README.md":                    strings.Repeat("line\n", readmeMaxLines) + "one too many: [gone](docs/gone.md), [here](docs/architecture.md#layout)\n",
		"docs/architecture.md": "# Architecture\n\n## Layout\n\n`corral` (the root package), `cmd/corral/`, `internal/named/`\n\n" +
			"[back](../README.md) [no heading](#nowhere) ![missing picture](missing.png) [web](https://example.org/x.md)\n\n" +
			"```sh\n# not a heading\n[not a link](in/code.md)\n```\n`[not a link](inline/code.md)`\n",
	}
	writeTree(t, root, files)
	got := strings.Join(docProblems(t, root), "\n")
	for _, want := range []string{
		"README.md has 301 lines",
		"internal/unnamed/",
		"README.md links to docs/gone.md",
		"docs/architecture.md links to #nowhere",
		"docs/architecture.md links to missing.png",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the problems do not name %q:\n%s", want, got)
		}
	}
	for _, wrong := range []string{"internal/named/", "internal/onlytests", "testdata", "example.org", "code.md", "#layout"} {
		if strings.Contains(got, wrong) {
			t.Errorf("the problems name %q, which is fine:\n%s", wrong, got)
		}
	}
}

// writeTree writes files, by slash-separated path, under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// docProblems describes everything wrong with the documentation under root.
func docProblems(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	readme := readDoc(t, root, "README.md")
	if n := strings.Count(strings.TrimSuffix(readme, "\n"), "\n") + 1; n > readmeMaxLines {
		out = append(out, fmt.Sprintf("README.md has %d lines, more than %d: move the detail under docs/", n, readmeMaxLines))
	}

	arch := readDoc(t, root, "docs/architecture.md")
	if !strings.Contains(arch, "the root package") {
		out = append(out, "docs/architecture.md does not name the root package (\"the root package\")")
	}
	for _, dir := range goPackageDirs(t, root, "internal", "cmd") {
		if !strings.Contains(arch, "`"+dir+"/`") {
			out = append(out, fmt.Sprintf("docs/architecture.md does not name package %s/ (as `%s/`)", dir, dir))
		}
	}

	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, filepath.ToSlash(rel))
	}
	for _, page := range pages {
		out = append(out, linkProblems(t, root, page)...)
	}
	return out
}

// readDoc reads one file of the tree, failing the test when it is missing.
func readDoc(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goPackageDirs lists, relative to root and with slashes, every directory
// under the given ones that holds a non-test Go file, skipping what the go
// tool ignores.
func goPackageDirs(t *testing.T, root string, under ...string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, u := range under {
		err := filepath.WalkDir(filepath.Join(root, u), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
				rel, err := filepath.Rel(root, filepath.Dir(p))
				if err != nil {
					return err
				}
				seen[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) == 0 {
		t.Fatalf("found no Go package under %v in %s: the walk is broken", under, root)
	}
	return slices.Sorted(maps.Keys(seen))
}

var (
	fenced     = regexp.MustCompile("(?ms)^```.*?^```[ \t]*$")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	linkTarget = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$`)
)

// prose is a page without its code: fenced blocks and inline code spans,
// where neither a link nor a heading is one.
func prose(page string) string {
	return inlineCode.ReplaceAllString(fenced.ReplaceAllString(page, ""), "")
}

// linkProblems checks every relative link of one page: the file it names
// exists, and so does the heading its fragment names.
func linkProblems(t *testing.T, root, page string) []string {
	t.Helper()
	var out []string
	text := prose(readDoc(t, root, page))
	for _, m := range linkTarget.FindAllStringSubmatch(text, -1) {
		target := m[1]
		if u, err := url.Parse(target); err != nil || u.Scheme != "" {
			continue // absolute: not ours to check
		}
		file, frag, _ := strings.Cut(target, "#")
		name := page
		if file != "" {
			name = path.Join(path.Dir(page), file)
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(name))); err != nil {
			out = append(out, fmt.Sprintf("%s links to %s: %s does not exist", page, target, name))
			continue
		}
		if frag == "" {
			continue
		}
		if !strings.HasSuffix(name, ".md") {
			out = append(out, fmt.Sprintf("%s links to %s: a fragment of a file that is not Markdown", page, target))
			continue
		}
		if !anchors(readDoc(t, root, name))[frag] {
			out = append(out, fmt.Sprintf("%s links to %s: %s has no heading with that anchor", page, target, name))
		}
	}
	return out
}

// anchors are the fragments GitHub makes of a page's headings: lower case,
// punctuation dropped, spaces as hyphens, and -1, -2 ... on repeats.
func anchors(page string) map[string]bool {
	set := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fenced.ReplaceAllString(page, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for i := 1; set[a]; i++ {
			a = fmt.Sprintf("%s-%d", b.String(), i)
		}
		set[a] = true
	}
	return set
}
