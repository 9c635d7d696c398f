package corral_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The import rules keep the layers apart: the sandbox, workspace and runner
// never reach accounts, storage or HTTP, so a bug there cannot be turned
// into a way past authorization; the API talks to the service layer only;
// the domain depends on nothing. Test files are exempt: they may wire real
// stores.
//
// The rules are checked by parsing the imports of the tree (every build tag
// at once, so a file for another OS or the "ui" tag cannot hide an import)
// rather than by asking the go tool: no toolchain call, and nothing to build.

const module = "corral"

// forbidden: a package of from must not import, directly or through any
// chain of project packages, a package matching one of to. A pattern ending
// in "/..." matches the package and everything below it.
var forbidden = []struct {
	from []string
	to   []string
	why  string
}{
	{
		from: []string{"corral/internal/sandbox", "corral/internal/workspace", "corral/internal/runner", "corral/internal/supervisor", "corral/internal/node"},
		to:   []string{"corral/internal/store/...", "corral/internal/retrieval", "corral/internal/auth", "corral/internal/api"},
		why:  "what runs agents' code must not reach storage, accounts or HTTP",
	},
	{
		from: []string{"corral/internal/runner"},
		to:   []string{"corral/internal/sandbox", "corral/internal/workspace", "corral/internal/supervisor", "corral/internal/node"},
		why:  "runs reach the sandboxes only through corral.Sessions, and their trees through the change-set service",
	},
	{
		from: []string{"corral/internal/service"},
		to:   []string{"corral/internal/runner", "corral/internal/sandbox", "corral/internal/supervisor", "corral/internal/node", "corral/internal/workspace", "corral/internal/archive"},
		why:  "the services reach runs through their Engine, workspaces and trees only through corral.Trees, and sandboxes only through corral.Sessions",
	},
	{
		from: []string{"corral/internal/protocol", "corral/internal/driver"},
		to:   []string{"corral/internal/..."},
		why:  "the model protocols and the agent CLIs' drivers are pure: data in, data out",
	},
	{
		from: []string{"corral/internal/modelapi"},
		to:   []string{"corral/internal/store/...", "corral/internal/retrieval", "corral/internal/auth", "corral/internal/api", "corral/internal/service", "corral/internal/sandbox", "corral/internal/node", "corral/internal/workspace"},
		why:  "the gateway agent CLIs reach from their sandboxes authorizes only by a run's grant: no accounts, no storage, no trees",
	},
	{
		from: []string{"corral/internal/modelapi"},
		to:   []string{"corral/internal/runner", "corral/internal/gateway"},
		why:  "the model API reaches runs through its Runs and the provider through its Upstream, both handed in by the composition root",
	},
	{
		from: []string{"corral/internal/runner"},
		to:   []string{"corral/internal/modelapi", "corral/internal/gateway"},
		why:  "the runner makes model calls through its Model and grants agent CLIs' calls as corral.CLIGrant: it knows neither the gateway nor the model API",
	},
	{
		from: []string{"corral/internal/gateway"},
		to:   []string{"corral/internal/runner", "corral/internal/modelapi", "corral/internal/service"},
		why:  "the gateway makes model calls and knows nothing of who makes them: the words of a call are the root package's",
	},
	{
		from: []string{"corral/internal/proxy", "corral/internal/egress"},
		to:   []string{"corral/internal/store/...", "corral/internal/retrieval", "corral/internal/auth", "corral/internal/api", "corral/internal/service", "corral/internal/runner", "corral/internal/secrets"},
		why:  "the egress proxy decides by the grant it is handed (secrets already opened): no storage, accounts or keys of its own",
	},
	{
		from: []string{"corral/internal/nodeagent", "corral/internal/relay", "corral/internal/relay/noderpc"},
		to:   []string{"corral/internal/store/...", "corral/internal/retrieval", "corral/internal/auth", "corral/internal/api", "corral/internal/service", "corral/internal/gateway", "corral/internal/modelapi", "corral/internal/runner", "corral/internal/secrets"},
		why:  "a sandbox node holds no database, no keys and no accounts: it is handed what each call needs",
	},
	{
		from: []string{"corral/internal/nodeagent", "corral/internal/relay", "corral/internal/relay/noderpc", "corral/internal/node", "corral/internal/supervisor", "corral/internal/sandbox"},
		to:   []string{"corral/internal/telemetry"},
		why:  "the runs' spans leave control only: a sandbox node sends none itself",
	},
	{
		from: []string{"corral/internal/access", "corral/internal/sanitize", "corral/internal/glob", "corral/internal/trace"},
		to:   []string{"corral/internal/telemetry"},
		why:  "OpenTelemetry stays out of the pure packages",
	},
	{
		from: []string{"corral/internal/backup"},
		to:   []string{"corral/internal/secrets"},
		why:  "a backup neither holds nor reads a key: the keys are kept apart from backups",
	},
	{
		from: []string{"corral/cmd/corral"},
		to:   []string{"corral/internal/gittest/...", "corral/internal/modeltest/...", "corral/internal/kerneltest", "corral/internal/nodetest", "corral/internal/secrets/secrettest", "corral/internal/vethtest", "corral/internal/poll", "corral/internal/toolstest", "corral/internal/abtest", "corral/internal/otlptest", "corral/internal/pgtest"},
		why:  "the server never carries the tests' fakes and servers",
	},
	{
		from: []string{"corral"},
		to:   []string{"corral/..."},
		why:  "the domain package imports nothing of the project",
	},
	{
		from: []string{"corral/internal/openapi"},
		to:   []string{"corral/..."},
		why:  "the OpenAPI writer is a library for internal/api: it knows nothing of the project",
	},
	{
		from: []string{"corral/internal/metrics"},
		to:   []string{"corral/internal/..."},
		why:  "the metrics are definitions: what they count and read is handed to them by the composition root, so no part's data can become a label by an import",
	},
}

// otelMayImport are the only packages that import OpenTelemetry
// (go.opentelemetry.io/...) directly: internal/telemetry, the server's one
// way to it, and internal/otlptest, the tests' collector. Every other part
// makes spans through internal/telemetry's own words.
var otelMayImport = []string{"corral/internal/telemetry", "corral/internal/otlptest"}

// otel is the import path prefix of OpenTelemetry's modules.
const otel = "go.opentelemetry.io/"

// apiMayImport is all of the project internal/api may import directly: the
// domain and the service layer, nothing below it; and internal/openapi,
// which writes its contract and imports nothing of the project (a rule
// above).
var apiMayImport = []string{"corral", "corral/internal/service", "corral/internal/openapi"}

// TestImportRules enforces the rules above over the project's non-test
// files and names the chain of imports that breaks one.
func TestImportRules(t *testing.T) {
	g := loadImports(t, ".")
	if len(g.imports["corral/internal/api"]) == 0 || len(g.imports["corral/internal/runner"]) == 0 {
		t.Fatalf("found no imports of internal/api or internal/runner: the walk of the tree is broken (%d packages)", len(g.imports))
	}
	for _, v := range g.violations() {
		t.Error(v)
	}
}

// violations checks g against the rules and describes each break.
func (g *graph) violations() []string {
	var out []string
	for _, rule := range forbidden {
		for _, from := range rule.from {
			if _, ok := g.imports[from]; !ok {
				out = append(out, fmt.Sprintf("rule %q names package %s, which has no Go files", rule.why, from))
				continue
			}
			for _, c := range g.reach(from, func(p string) bool { return matchAny(p, rule.to) }) {
				out = append(out, fmt.Sprintf("%s must not import %s (%s):\n%s", from, c.last(), rule.why, g.describe(c)))
			}
		}
	}

	// The composition root is the binary's alone: a part that built the
	// server itself would be a second root.
	const root = "corral/internal/app"
	for _, pkg := range g.packages() {
		if _, ok := g.imports[pkg][root]; ok && pkg != "corral/cmd/corral" {
			out = append(out, "only cmd/corral may import internal/app, the composition root:\n"+g.describe(chain{pkg, root}))
		}
	}

	for _, pkg := range g.packages() {
		if matchAny(pkg, otelMayImport) {
			continue
		}
		for _, imp := range g.sortedImports(pkg) {
			if strings.HasPrefix(imp, otel) {
				out = append(out, "only internal/telemetry (and internal/otlptest, the tests' collector) may import OpenTelemetry:\n"+g.describe(chain{pkg, imp}))
			}
		}
	}

	const api = "corral/internal/api"
	for _, imp := range g.sortedImports(api) {
		if matchAny(imp, apiMayImport) {
			continue
		}
		out = append(out, "internal/api must import nothing of the project but the root package and internal/service:\n"+g.describe(chain{api, imp}))
	}
	return out
}

// TestImportRulesNameTheChain runs the checker over a small tree that breaks
// each rule, so the real test is known to be able to fail.
func TestImportRulesNameTheChain(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                            "module corral\n",
		"corral.go":                         "package corral\n\nimport _ \"corral/internal/trace\"\n",
		"internal/trace/trace.go":           "package trace\n",
		"internal/sandbox/sandbox.go":       "package sandbox\n",
		"internal/sandbox/sandbox_test.go":  "package sandbox\n\nimport _ \"corral/internal/store\"\n",
		"internal/runner/runner.go":         "package runner\n\nimport (\n\t\"fmt\"\n\n\t_ \"corral/internal/workspace\"\n)\n",
		"internal/workspace/ws_other.go":    "//go:build !linux\n\npackage workspace\n\nimport _ \"corral/internal/store\"\n",
		"internal/store/db.go":              "package store\n",
		"internal/api/api.go":               "package api\n\nimport (\n\t_ \"corral\"\n\t_ \"corral/internal/service\"\n\t_ \"corral/internal/runner\"\n\t_ \"corral/internal/auth\"\n)\n",
		"internal/service/service.go":       "package service\n\nimport _ \"corral/internal/gittest\"\n",
		"internal/service/runs.go":          "package service\n\nimport _ \"corral/internal/sandbox\"\n",
		"internal/service/changes.go":       "package service\n\nimport _ \"corral/internal/workspace\"\n",
		"internal/supervisor/supervisor.go": "package supervisor\n",
		"internal/node/node.go":             "package node\n",
		"internal/protocol/protocol.go":     "package protocol\n",
		"internal/driver/driver.go":         "package driver\n",
		"internal/modelapi/modelapi.go":     "package modelapi\n\nimport _ \"corral/internal/service\"\n",
		"internal/modelapi/runs.go":         "package modelapi\n\nimport _ \"corral/internal/runner\"\n",
		"internal/runner/model.go":          "package runner\n\nimport _ \"corral/internal/gateway\"\n",
		"internal/gateway/gateway.go":       "package gateway\n\nimport _ \"corral/internal/runner\"\n",
		"internal/gittest/gittest.go":       "package gittest\n",
		"internal/app/app.go":               "package app\n",
		"internal/fleet/fleet.go":           "package fleet\n\nimport _ \"corral/internal/app\"\n",
		"cmd/corral/main.go":                "package main\n\nimport _ \"corral/internal/service\"\n",
		"internal/auth/auth.go":             "package auth\n",
		"internal/relay/relay.go":           "package relay\n",
		"internal/relay/noderpc/noderpc.go": "package noderpc\n",
		"internal/nodeagent/nodeagent.go":   "package nodeagent\n\nimport _ \"corral/internal/relay\"\n\nimport _ \"corral/internal/secrets\"\n",
		"internal/secrets/secrets.go":       "package secrets\n",
		"internal/egress/egress.go":         "package egress\n",
		"internal/proxy/proxy.go":           "package proxy\n\nimport _ \"corral/internal/secrets\"\n",
		"internal/backup/backup.go":         "package backup\n\nimport _ \"corral/internal/secrets\"\n",
		"internal/openapi/openapi.go":       "package openapi\n\nimport _ \"corral/internal/trace\"\n",
		"internal/metrics/metrics.go":       "package metrics\n\nimport _ \"corral/internal/store\"\n",
		"internal/telemetry/telemetry.go":   "package telemetry\n\nimport _ \"go.opentelemetry.io/otel/trace\"\n",
		"internal/access/access.go":         "package access\n",
		"internal/sanitize/sanitize.go":     "package sanitize\n",
		"internal/glob/glob.go":             "package glob\n",
		"internal/gateway/span.go":          "package gateway\n\nimport _ \"go.opentelemetry.io/otel/trace\"\n",
		"internal/relay/span.go":            "package relay\n\nimport _ \"corral/internal/telemetry\"\n",
		"web/node_modules/x/api.go":         "package x\n\nimport _ \"corral/internal/api\"\n",
		"internal/sandbox/testdata/bad.go":  "package bad\n\nimport _ \"corral/internal/api\"\n",
	}
	writeTree(t, root, files)
	g := loadImports(t, root)
	got := g.violations()
	want := []string{
		"corral/internal/workspace must not import corral/internal/store (what runs agents' code must not reach storage, accounts or HTTP):\n" +
			"\tcorral/internal/workspace imports corral/internal/store (internal/workspace/ws_other.go)",
		"corral/internal/runner must not import corral/internal/store (what runs agents' code must not reach storage, accounts or HTTP):\n" +
			"\tcorral/internal/runner imports corral/internal/workspace (internal/runner/runner.go)\n" +
			"\tcorral/internal/workspace imports corral/internal/store (internal/workspace/ws_other.go)",
		"corral/internal/runner must not import corral/internal/workspace (runs reach the sandboxes only through corral.Sessions, and their trees through the change-set service):\n" +
			"\tcorral/internal/runner imports corral/internal/workspace (internal/runner/runner.go)",
		"corral/internal/service must not import corral/internal/sandbox (the services reach runs through their Engine, workspaces and trees only through corral.Trees, and sandboxes only through corral.Sessions):\n" +
			"\tcorral/internal/service imports corral/internal/sandbox (internal/service/runs.go)",
		"corral/internal/service must not import corral/internal/workspace (the services reach runs through their Engine, workspaces and trees only through corral.Trees, and sandboxes only through corral.Sessions):\n" +
			"\tcorral/internal/service imports corral/internal/workspace (internal/service/changes.go)",
		"corral/internal/modelapi must not import corral/internal/service (the gateway agent CLIs reach from their sandboxes authorizes only by a run's grant: no accounts, no storage, no trees):\n" +
			"\tcorral/internal/modelapi imports corral/internal/service (internal/modelapi/modelapi.go)",
		"corral/internal/modelapi must not import corral/internal/workspace (the gateway agent CLIs reach from their sandboxes authorizes only by a run's grant: no accounts, no storage, no trees):\n" +
			"\tcorral/internal/modelapi imports corral/internal/runner (internal/modelapi/runs.go)\n" +
			"\tcorral/internal/runner imports corral/internal/workspace (internal/runner/runner.go)",
		"corral/internal/modelapi must not import corral/internal/runner (the model API reaches runs through its Runs and the provider through its Upstream, both handed in by the composition root):\n" +
			"\tcorral/internal/modelapi imports corral/internal/runner (internal/modelapi/runs.go)",
		"corral/internal/runner must not import corral/internal/gateway (the runner makes model calls through its Model and grants agent CLIs' calls as corral.CLIGrant: it knows neither the gateway nor the model API):\n" +
			"\tcorral/internal/runner imports corral/internal/gateway (internal/runner/model.go)",
		"corral/internal/gateway must not import corral/internal/runner (the gateway makes model calls and knows nothing of who makes them: the words of a call are the root package's):\n" +
			"\tcorral/internal/gateway imports corral/internal/runner (internal/gateway/gateway.go)",
		"corral/internal/proxy must not import corral/internal/secrets (the egress proxy decides by the grant it is handed (secrets already opened): no storage, accounts or keys of its own):\n" +
			"\tcorral/internal/proxy imports corral/internal/secrets (internal/proxy/proxy.go)",
		"corral/internal/nodeagent must not import corral/internal/secrets (a sandbox node holds no database, no keys and no accounts: it is handed what each call needs):\n" +
			"\tcorral/internal/nodeagent imports corral/internal/secrets (internal/nodeagent/nodeagent.go)",
		"corral/internal/nodeagent must not import corral/internal/telemetry (the runs' spans leave control only: a sandbox node sends none itself):\n" +
			"\tcorral/internal/nodeagent imports corral/internal/relay (internal/nodeagent/nodeagent.go)\n" +
			"\tcorral/internal/relay imports corral/internal/telemetry (internal/relay/span.go)",
		"corral/internal/relay must not import corral/internal/telemetry (the runs' spans leave control only: a sandbox node sends none itself):\n" +
			"\tcorral/internal/relay imports corral/internal/telemetry (internal/relay/span.go)",
		"corral/internal/backup must not import corral/internal/secrets (a backup neither holds nor reads a key: the keys are kept apart from backups):\n" +
			"\tcorral/internal/backup imports corral/internal/secrets (internal/backup/backup.go)",
		"corral/cmd/corral must not import corral/internal/gittest (the server never carries the tests' fakes and servers):\n" +
			"\tcorral/cmd/corral imports corral/internal/service (cmd/corral/main.go)\n" +
			"\tcorral/internal/service imports corral/internal/gittest (internal/service/service.go)",
		"corral must not import corral/internal/trace (the domain package imports nothing of the project):\n" +
			"\tcorral imports corral/internal/trace (corral.go)",
		"corral/internal/openapi must not import corral/internal/trace (the OpenAPI writer is a library for internal/api: it knows nothing of the project):\n" +
			"\tcorral/internal/openapi imports corral/internal/trace (internal/openapi/openapi.go)",
		"corral/internal/metrics must not import corral/internal/store (the metrics are definitions: what they count and read is handed to them by the composition root, so no part's data can become a label by an import):\n" +
			"\tcorral/internal/metrics imports corral/internal/store (internal/metrics/metrics.go)",
		"only cmd/corral may import internal/app, the composition root:\n" +
			"\tcorral/internal/fleet imports corral/internal/app (internal/fleet/fleet.go)",
		"only internal/telemetry (and internal/otlptest, the tests' collector) may import OpenTelemetry:\n" +
			"\tcorral/internal/gateway imports go.opentelemetry.io/otel/trace (internal/gateway/span.go)",
		"internal/api must import nothing of the project but the root package and internal/service:\n" +
			"\tcorral/internal/api imports corral/internal/auth (internal/api/api.go)",
		"internal/api must import nothing of the project but the root package and internal/service:\n" +
			"\tcorral/internal/api imports corral/internal/runner (internal/api/api.go)",
	}
	if strings.Join(got, "\n\n") != strings.Join(want, "\n\n") {
		t.Errorf("violations =\n%s\n\nwant\n%s", strings.Join(got, "\n\n"), strings.Join(want, "\n\n"))
	}
}

// matchAny reports whether pkg matches one of patterns ("x" is x itself,
// "x/..." is x and everything below it).
func matchAny(pkg string, patterns []string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if pkg == base || strings.HasPrefix(pkg, base+"/") {
				return true
			}
		} else if pkg == p {
			return true
		}
	}
	return false
}

// graph holds, for each package of the project, the project packages its
// non-test files import (and OpenTelemetry's, for their own rule), and one
// file that makes each import.
type graph struct {
	imports map[string]map[string]string // package → import → file
}

// loadImports parses the import blocks of every non-test Go file under root.
func loadImports(t *testing.T, root string) *graph {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the import rules must run from the module root: %v", err)
	}
	g := &graph{imports: map[string]map[string]string{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// What the go tool ignores, and the web app's node_modules.
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		file, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		file = filepath.ToSlash(file)
		dir := path.Dir(file)
		pkg := module
		if dir != "." {
			pkg = module + "/" + dir
		}
		if g.imports[pkg] == nil {
			g.imports[pkg] = map[string]string{}
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if imp != module && !strings.HasPrefix(imp, module+"/") && !strings.HasPrefix(imp, otel) {
				continue
			}
			if _, ok := g.imports[pkg][imp]; !ok {
				g.imports[pkg][imp] = file
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read the tree's imports: %v", err)
	}
	return g
}

// packages lists the project's packages, sorted.
func (g *graph) packages() []string {
	var out []string
	for pkg := range g.imports {
		out = append(out, pkg)
	}
	sort.Strings(out)
	return out
}

func (g *graph) sortedImports(pkg string) []string {
	var out []string
	for imp := range g.imports[pkg] {
		out = append(out, imp)
	}
	sort.Strings(out)
	return out
}

// chain is a chain of imports, from the first package to the last.
type chain []string

func (c chain) last() string { return c[len(c)-1] }

// reach returns, for each package matching bad that from reaches, the
// shortest chain of imports leading to it.
func (g *graph) reach(from string, bad func(string) bool) []chain {
	prev := map[string]string{from: ""}
	queue := []string{from}
	var found []chain
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range g.sortedImports(pkg) {
			if _, ok := prev[imp]; ok {
				continue
			}
			prev[imp] = pkg
			if bad(imp) {
				var c chain
				for p := imp; p != ""; p = prev[p] {
					c = append(chain{p}, c...)
				}
				found = append(found, c)
				continue
			}
			queue = append(queue, imp)
		}
	}
	return found
}

// describe writes a chain one import a line, with the file that makes it.
func (g *graph) describe(c chain) string {
	var b strings.Builder
	for i := 1; i < len(c); i++ {
		b.WriteString("\t" + c[i-1] + " imports " + c[i] + " (" + g.imports[c[i-1]][c[i]] + ")\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
