package workspace

import (
	"io/fs"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	file := func(p string) Entry { return Entry{Path: p, Op: OpCreate, Mode: 0o644, Size: 10} }
	with := func(e Entry, f func(*Entry)) Entry { f(&e); return e }
	policy := ClassPolicy{
		Protected: []string{"deploy/*.key", "infra", "docs/**/private.md"},
		Risky:     []string{"*.sql", "migrations/**"},
		LargeFile: 100,
	}
	cases := []struct {
		name  string
		e     Entry
		p     ClassPolicy
		class string
	}{
		// Ordinary.
		{"plain file", file("main.go"), policy, ClassOrdinary},
		{"nested file", file("internal/api/api.go"), policy, ClassOrdinary},
		{"modify keeping the mode", Entry{Path: "a.go", Op: OpModify, Mode: 0o644, OldMode: 0o644, Size: 1}, policy, ClassOrdinary},
		{"Makefile is ordinary", file("Makefile"), policy, ClassOrdinary},
		{"name like .git but not it", file("x.git/config"), policy, ClassOrdinary},
		{".gitignore", file(".gitignore"), policy, ClassOrdinary},
		{".environment is not .env.*", file(".environment"), policy, ClassOrdinary},
		{".envrc", file(".envrc"), policy, ClassOrdinary},
		{".corral below the root", file("sub/.corral/x"), policy, ClassOrdinary},
		{"at the size limit", with(file("big.txt"), func(e *Entry) { e.Size = 100 }), policy, ClassOrdinary},
		{"default limit: 1 MiB exactly", with(file("big.txt"), func(e *Entry) { e.Size = 1 << 20 }), ClassPolicy{}, ClassOrdinary},
		{"configured glob is anchored", file("x/deploy/a.key"), policy, ClassOrdinary},
		{"configured globs match case for case", file("INFRA/main.tf"), policy, ClassOrdinary},
		{"hint ordinary", with(file("a"), func(e *Entry) { e.Class = ClassOrdinary }), policy, ClassOrdinary},

		// Protected: flags.
		{"symlink flag", with(file("link"), func(e *Entry) { e.Flags = []string{FlagSymlink} }), policy, ClassProtected},
		{"hardlink flag", with(file("h"), func(e *Entry) { e.Flags = []string{FlagHardlink} }), policy, ClassProtected},
		{"device flag", with(file("p"), func(e *Entry) { e.Flags = []string{FlagDevice} }), policy, ClassProtected},
		{"setuid flag", with(file("s"), func(e *Entry) { e.Flags = []string{FlagSetuid} }), policy, ClassProtected},
		{"escape flag", with(file("l"), func(e *Entry) { e.Flags = []string{FlagEscape} }), policy, ClassProtected},
		{"internal flag", with(file(".corral/x"), func(e *Entry) { e.Flags = []string{FlagInternal} }), policy, ClassProtected},
		{"unknown flag", with(file("a"), func(e *Entry) { e.Flags = []string{"whatever"} }), policy, ClassProtected},
		// Protected: paths.
		{".git itself", file(".git"), policy, ClassProtected},
		{".git/config", file(".git/config"), policy, ClassProtected},
		{".git hook", file(".git/hooks/pre-commit"), policy, ClassProtected},
		{".GIT/config", file(".GIT/config"), policy, ClassProtected},
		{".Git/HEAD", file(".Git/HEAD"), policy, ClassProtected},
		{"submodule .git", file("vendor/lib/.git"), policy, ClassProtected},
		{"nested .git dir", file("a/b/.git/objects/x"), policy, ClassProtected},
		{".env", file(".env"), policy, ClassProtected},
		{".ENV", file(".ENV"), policy, ClassProtected},
		{".env.local", file(".env.local"), policy, ClassProtected},
		{"nested .env.production", file("svc/api/.env.production"), policy, ClassProtected},
		{"under a .env directory", file(".env/x"), policy, ClassProtected},
		{"delete of .env", Entry{Path: "app/.env", Op: OpDelete, OldMode: 0o600}, policy, ClassProtected},
		{".corral at the root", file(".corral"), policy, ClassProtected},
		{"under .corral", file(".corral/state/db"), policy, ClassProtected},
		{".CORRAL", file(".CORRAL/x"), policy, ClassProtected},
		{"configured anchored glob", file("deploy/prod.key"), policy, ClassProtected},
		{"configured name glob, nested", file("a/infra/main.tf"), policy, ClassProtected},
		{"configured ** glob", file("docs/a/b/private.md"), policy, ClassProtected},
		{"configured ** glob, no middle", file("docs/private.md"), policy, ClassProtected},
		{"protected beats risky", with(file(".git/hooks/x"), func(e *Entry) { e.Mode = 0o755 }), policy, ClassProtected},
		{"protected beats a risky hint", with(file(".env"), func(e *Entry) { e.Class = ClassRisky }), policy, ClassProtected},
		{"protected hint kept", with(file("secret.pem"), func(e *Entry) { e.Class = ClassProtected }), policy, ClassProtected},
		// Protected: hostile entries.
		{"absolute path", file("/etc/passwd"), policy, ClassProtected},
		{"climbing path", file("../x"), policy, ClassProtected},
		{"unclean path", file("a/../b"), policy, ClassProtected},
		{"dot element", file("./a"), policy, ClassProtected},
		{"empty path", file(""), policy, ClassProtected},
		{"root", file("."), policy, ClassProtected},
		{"double slash", file("a//b"), policy, ClassProtected},
		{"trailing slash", file("a/"), policy, ClassProtected},
		{"NUL in path", file("a\x00b"), policy, ClassProtected},
		{"unknown op", Entry{Path: "a", Op: "rename"}, policy, ClassProtected},

		// Risky.
		{"delete", Entry{Path: "main.go", Op: OpDelete, OldMode: 0o644}, policy, ClassRisky},
		{"chmod +x", Entry{Path: "a.sh", Op: OpModify, Mode: 0o755, OldMode: 0o644}, policy, ClassRisky},
		{"chmod -x", Entry{Path: "a.sh", Op: OpModify, Mode: 0o644, OldMode: 0o755}, policy, ClassRisky},
		{"chmod go-r", Entry{Path: "a", Op: OpModify, Mode: 0o600, OldMode: 0o644}, policy, ClassRisky},
		{"setuid dropped", Entry{Path: "a", Op: OpModify, Mode: 0o755, OldMode: 0o755 | fs.ModeSetuid}, policy, ClassRisky},
		{"executable create", with(file("run.sh"), func(e *Entry) { e.Mode = 0o755 }), policy, ClassRisky},
		{"group executable", with(file("run"), func(e *Entry) { e.Mode = 0o610 }), policy, ClassRisky},
		{"other executable", with(file("run"), func(e *Entry) { e.Mode = 0o601 }), policy, ClassRisky},
		{"executable modify", Entry{Path: "bin/x", Op: OpModify, Mode: 0o755, OldMode: 0o755}, policy, ClassRisky},
		{"large", with(file("big.bin"), func(e *Entry) { e.Size = 101 }), policy, ClassRisky},
		{"large by default", with(file("big.bin"), func(e *Entry) { e.Size = 1<<20 + 1 }), ClassPolicy{}, ClassRisky},
		{"binary hint", with(file("a.png"), func(e *Entry) { e.Class = ClassRisky }), policy, ClassRisky},
		{"unknown hint", with(file("a"), func(e *Entry) { e.Class = "bogus" }), policy, ClassRisky},
		{"configured risky name glob", file("db/schema.sql"), policy, ClassRisky},
		{"configured risky ** glob", file("migrations/2024/01.go"), policy, ClassRisky},
		// Risky: CI and workflows.
		{"github workflow", file(".github/workflows/ci.yml"), policy, ClassRisky},
		{"github dependabot", file(".github/dependabot.yml"), policy, ClassRisky},
		{"GitHub in another case", file(".GitHub/workflows/x.yml"), policy, ClassRisky},
		{".gitlab-ci.yml", file(".gitlab-ci.yml"), policy, ClassRisky},
		{"circleci", file(".circleci/config.yml"), policy, ClassRisky},
		{"Jenkinsfile", file("Jenkinsfile"), policy, ClassRisky},
		{"nested jenkinsfile", file("ci/jenkinsfile"), policy, ClassRisky},
		{".travis.yml", file(".travis.yml"), policy, ClassRisky},
		{"azure-pipelines.yml", file("azure-pipelines.yml"), policy, ClassRisky},
		{"buildkite", file(".buildkite/pipeline.yml"), policy, ClassRisky},
		{"Dockerfile", file("Dockerfile"), policy, ClassRisky},
		{"nested dockerfile", file("build/DOCKERFILE"), policy, ClassRisky},
		{"Dockerfile.dev", file("Dockerfile.dev"), policy, ClassRisky},
		{"api.Dockerfile", file("api.Dockerfile"), policy, ClassRisky},
		{"docker-compose.yml", file("docker-compose.yml"), policy, ClassRisky},
		{"husky hook", file(".husky/pre-commit"), policy, ClassRisky},
		{".gitmodules", file(".gitmodules"), policy, ClassRisky},
		// Risky: dependencies.
		{"go.mod", file("go.mod"), policy, ClassRisky},
		{"nested go.sum", file("tools/go.sum"), policy, ClassRisky},
		{"package.json", file("web/package.json"), policy, ClassRisky},
		{"package-lock.json", file("package-lock.json"), policy, ClassRisky},
		{"yarn.lock", file("yarn.lock"), policy, ClassRisky},
		{"pnpm-lock.yaml", file("pnpm-lock.yaml"), policy, ClassRisky},
		{"requirements.txt", file("requirements.txt"), policy, ClassRisky},
		{"requirements-dev.txt", file("py/requirements-dev.txt"), policy, ClassRisky},
		{"Pipfile", file("Pipfile"), policy, ClassRisky},
		{"Pipfile.lock", file("Pipfile.lock"), policy, ClassRisky},
		{"poetry.lock", file("poetry.lock"), policy, ClassRisky},
		{"pyproject.toml", file("pyproject.toml"), policy, ClassRisky},
		{"Cargo.toml", file("crates/x/Cargo.toml"), policy, ClassRisky},
		{"Cargo.lock", file("Cargo.lock"), policy, ClassRisky},
		{"CARGO.LOCK", file("CARGO.LOCK"), policy, ClassRisky},
		{"Gemfile", file("Gemfile"), policy, ClassRisky},
		{"Gemfile.lock", file("Gemfile.lock"), policy, ClassRisky},
		{"composer.json", file("composer.json"), policy, ClassRisky},
		{"composer.lock", file("composer.lock"), policy, ClassRisky},
		{"pom.xml", file("pom.xml"), policy, ClassRisky},
		{"build.gradle", file("build.gradle"), policy, ClassRisky},
		{"build.gradle.kts", file("app/build.gradle.kts"), policy, ClassRisky},
		{"a .csproj", file("src/App.csproj"), policy, ClassRisky},
		{"packages.config", file("packages.config"), policy, ClassRisky},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Classify(c.e, c.p); got != c.class {
				t.Errorf("Classify(%+v) = %s, want %s", c.e, got, c.class)
			}
		})
	}
}

func TestClassifyAll(t *testing.T) {
	m := Manifest{
		{Path: ".env", Op: OpCreate, Mode: 0o644},
		{Path: "a.go", Op: OpCreate, Mode: 0o644},
		{Path: "b.go", Op: OpDelete, OldMode: 0o644},
	}
	got := ClassifyAll(m, ClassPolicy{})
	for i, want := range []string{ClassProtected, ClassOrdinary, ClassRisky} {
		if got[i].Class != want {
			t.Errorf("ClassifyAll: %s = %s, want %s", got[i].Path, got[i].Class, want)
		}
		if m[i].Class != "" {
			t.Errorf("ClassifyAll changed its argument: %s = %q", m[i].Path, m[i].Class)
		}
	}
}

func TestMatchGlob(t *testing.T) {
	cases := []struct {
		glob, path string
		want       bool
	}{
		{"*.pem", "a.pem", true},
		{"*.pem", "keys/deep/a.pem", true},
		{"*.pem", "a.pem.txt", false},
		{"secrets", "secrets/a/b", true},
		{"secrets", "x/secrets", true},
		{"secrets/*.pem", "secrets/a.pem", true},
		{"secrets/*.pem", "x/secrets/a.pem", false},
		{"secrets/*.pem", "secrets/sub/a.pem", false},
		{"/secrets/*.pem", "secrets/a.pem", true},
		{"secrets/**/*.pem", "secrets/a.pem", true},
		{"secrets/**/*.pem", "secrets/a/b/c.pem", true},
		{"secrets/**", "secrets/a/b", true},
		{"**/*.pem", "a/b.pem", true},
		{"**", "anything/at/all", true},
		{"a/**/b/**/c", "a/x/b/y/z/c", true},
		{"a/**/b/**/c", "a/x/c", false},
		{"sub/dir", "sub/dir/file", true},
		{"sub/dir", "sub/dirx", false},
		{"[x", "[x", false},
		{"", "a", false},
	}
	for _, c := range cases {
		if got := matchGlob(c.glob, c.path); got != c.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
	for _, g := range []string{"", "/", "a//b", "a/../b", "[x", "./a"} {
		if ValidGlob(g) == nil {
			t.Errorf("ValidGlob(%q) = nil, want an error", g)
		}
	}
	for _, g := range []string{"*.pem", "/secrets/**", "a/[bc]/d"} {
		if err := ValidGlob(g); err != nil {
			t.Errorf("ValidGlob(%q) = %v", g, err)
		}
	}
}

// secretEntry, used while walking, agrees with secret on every path of a
// walk that skips hidden directories.
func TestSecretEntryAgrees(t *testing.T) {
	m := newSecretMatcher([]string{"*.pem", "secrets/**/*.key", "/conf/prod", "*.bak"})
	paths := []string{".env", "a/.env", "a/.ENV.local", ".envrc", ".corral", "x/.corral", "k.pem", "a/b/k.pem",
		"secrets/a.key", "secrets/x/y/a.key", "x/secrets/a.key", "conf/prod", "conf/prod/x", "conf/dev", "a.bak", "d/e.bak", "plain"}
	for _, p := range paths {
		// The walk reaches p only if no directory above is secret.
		above := false
		for i := range len(p) {
			if p[i] == '/' && m.secret(p[:i]) {
				above = true
			}
		}
		if above {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if got, want := m.secretEntry(p, name), m.secret(p); got != want {
			t.Errorf("secretEntry(%q) = %v, secret = %v", p, got, want)
		}
	}
}
