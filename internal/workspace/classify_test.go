package workspace

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"corral/internal/glob"
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
		{"notes about a Makefile", file("docs/makefile-notes.md"), policy, ClassOrdinary},
		{"name like .git but not it", file("x.git/config"), policy, ClassOrdinary},
		{".gitignore", file(".gitignore"), policy, ClassOrdinary},
		{".environment is not .env.*", file(".environment"), policy, ClassOrdinary},
		{".envrc.txt is not .envrc", file(".envrc.txt"), policy, ClassOrdinary},
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

// TestRiskyBuiltins: each built-in risky glob, by name, makes its files
// risky (in the case they are usually written) while a neighbour stays
// ordinary; and no glob of the list is left without a case.
func TestRiskyBuiltins(t *testing.T) {
	file := func(p string) Entry { return Entry{Path: p, Op: OpCreate, Mode: 0o644, Size: 10} }
	cases := []struct {
		glob      string
		risky     []string
		neighbour string // ordinary
	}{
		// CI, workflows and things other tools run on their own.
		{".github", []string{".github/workflows/ci.yml", ".GitHub/dependabot.yml"}, "docs/github.md"},
		{".gitlab", []string{".gitlab/ci/build.yml"}, "docs/gitlab.md"},
		{".gitlab-ci.yml", []string{".gitlab-ci.yml"}, "docs/gitlab-ci.md"},
		{".circleci", []string{".circleci/config.yml"}, "circleci.md"},
		{"jenkinsfile", []string{"Jenkinsfile", "ci/jenkinsfile"}, "docs/jenkinsfile-notes.md"},
		{".travis.yml", []string{".travis.yml"}, "travis.yml"},
		{"azure-pipelines.yml", []string{"azure-pipelines.yml"}, "azure-pipelines.md"},
		{".buildkite", []string{".buildkite/pipeline.yml"}, "buildkite.md"},
		{"bitbucket-pipelines.yml", []string{"bitbucket-pipelines.yml"}, "bitbucket.yml"},
		{".drone.yml", []string{".drone.yml"}, "drone.yml"},
		{".woodpecker.yml", []string{".woodpecker.yml"}, "woodpecker.yml"},
		{".woodpecker", []string{".woodpecker/test.yml"}, "woodpecker/test.yml"},
		{".gitmodules", []string{".gitmodules"}, "gitmodules.txt"},
		{".gitattributes", []string{".gitattributes", "sub/.gitattributes"}, ".gitignore"},
		{".husky", []string{".husky/pre-commit"}, "husky.md"},
		{".pre-commit-config.yaml", []string{".pre-commit-config.yaml"}, "pre-commit-config.yaml"},
		{".devcontainer", []string{".devcontainer/devcontainer.json"}, "devcontainer.md"},
		{".vscode", []string{".vscode/tasks.json", ".vscode/settings.json"}, "docs/vscode.md"},
		{"dockerfile", []string{"Dockerfile", "build/DOCKERFILE"}, "docs/dockerfile-notes.md"},
		{"dockerfile.*", []string{"Dockerfile.dev"}, "dockerfiles.md"},
		{"*.dockerfile", []string{"api.Dockerfile"}, "api.docker"},
		{"docker-compose*.yml", []string{"docker-compose.yml", "docker-compose.override.yml"}, "docker-compose.md"},
		{"docker-compose*.yaml", []string{"docker-compose.yaml"}, "docker.yaml"},
		{"compose.yml", []string{"compose.yml"}, "compose.go"},
		{"compose.yaml", []string{"deploy/compose.yaml"}, "decompose.yaml"},
		// Dependency manifests and lockfiles.
		{"go.mod", []string{"go.mod"}, "src/main.go"},
		{"go.sum", []string{"tools/go.sum"}, "go.summary"},
		{"go.work", []string{"go.work"}, "go.workflow"},
		{"go.work.sum", []string{"go.work.sum"}, "go.work.md"},
		{"package.json", []string{"web/package.json"}, "web/packages.md"},
		{"package-lock.json", []string{"package-lock.json"}, "package-lock.md"},
		{"npm-shrinkwrap.json", []string{"npm-shrinkwrap.json"}, "shrinkwrap.json"},
		{"yarn.lock", []string{"yarn.lock"}, "yarn.md"},
		{"pnpm-lock.yaml", []string{"pnpm-lock.yaml"}, "pnpm.md"},
		{"bun.lockb", []string{"bun.lockb"}, "bun.md"},
		{".npmrc", []string{".npmrc", "web/.npmrc"}, "npmrc.md"},
		{".yarnrc", []string{".yarnrc"}, "yarnrc.md"},
		{".yarnrc.yml", []string{".yarnrc.yml"}, "yarnrc.yml"},
		{"requirements*.txt", []string{"requirements.txt", "py/requirements-dev.txt"}, "requirements.md"},
		{"pipfile", []string{"Pipfile"}, "pipfile.md"},
		{"pipfile.lock", []string{"Pipfile.lock"}, "pipfile.lock.md"},
		{"poetry.lock", []string{"poetry.lock"}, "poetry.md"},
		{"pyproject.toml", []string{"pyproject.toml"}, "project.toml"},
		{"setup.py", []string{"setup.py"}, "src/setup_helpers.py"},
		{"setup.cfg", []string{"setup.cfg"}, "setup.md"},
		{"uv.lock", []string{"uv.lock"}, "uv.md"},
		{"cargo.toml", []string{"crates/x/Cargo.toml"}, "crates/x/src/lib.rs"},
		{"cargo.lock", []string{"Cargo.lock", "CARGO.LOCK"}, "cargo.md"},
		{"gemfile", []string{"Gemfile"}, "gemfile.md"},
		{"gemfile.lock", []string{"Gemfile.lock"}, "gemfile.lock.md"},
		{"*.gemspec", []string{"corral.gemspec"}, "gemspec.md"},
		{"composer.json", []string{"composer.json"}, "composer.md"},
		{"composer.lock", []string{"composer.lock"}, "composer.txt"},
		{"pom.xml", []string{"pom.xml", "svc/pom.xml"}, "pom.md"},
		{"build.gradle*", []string{"build.gradle", "app/build.gradle.kts"}, "docs/build-gradle.md"},
		{"settings.gradle*", []string{"settings.gradle.kts"}, "settings.json"},
		{"gradle.properties", []string{"gradle.properties"}, "app.properties"},
		{"*.csproj", []string{"src/App.csproj"}, "src/App.cs"},
		{"packages.config", []string{"packages.config"}, "packages.md"},
		{"directory.packages.props", []string{"Directory.Packages.props"}, "Directory.md"},
		{"nuget.config", []string{"NuGet.Config"}, "nuget.md"},
		{"deno.json", []string{"deno.json"}, "deno.md"},
		{"deno.jsonc", []string{"deno.jsonc"}, "deno.txt"},
		{"deno.lock", []string{"deno.lock"}, "src/deno.ts"},

		// Build files.
		{"makefile", []string{"Makefile", "sub/makefile"}, "docs/makefile-notes.md"},
		{"gnumakefile", []string{"GNUmakefile"}, "gnu.md"},
		{"*.mk", []string{"build.mk", "mk/rules.mk"}, "mk/README.md"},
		{"*.mak", []string{"win32.mak"}, "win32.md"},
		{"makefile.am", []string{"Makefile.am"}, "makefile.md"},
		{"makefile.in", []string{"src/Makefile.in"}, "src/main.c"},
		{"cmakelists.txt", []string{"CMakeLists.txt", "lib/CMakeLists.txt"}, "lib/lists.txt"},
		{"*.cmake", []string{"cmake/FindFoo.cmake"}, "cmake/README.md"},
		{"cmakepresets.json", []string{"CMakePresets.json"}, "presets.json"},
		{"cmakeuserpresets.json", []string{"CMakeUserPresets.json"}, "userpresets.json"},
		{"meson.build", []string{"meson.build", "src/meson.build"}, "src/meson.md"},
		{"meson_options.txt", []string{"meson_options.txt"}, "options.txt"},
		{"meson.options", []string{"meson.options"}, "meson.md"},
		{"build.rs", []string{"build.rs", "crates/x/build.rs"}, "src/main.rs"},
		{"build", []string{"BUILD", "pkg/BUILD", "build/out.js"}, "src/builder.go"},
		{"build.bazel", []string{"BUILD.bazel", "pkg/BUILD.bazel"}, "pkg/main.go"},
		{"workspace", []string{"WORKSPACE"}, "docs/workspace-setup.md"},
		{"workspace.bazel", []string{"WORKSPACE.bazel"}, "workspace.md"},
		{"workspace.bzlmod", []string{"WORKSPACE.bzlmod"}, "bzlmod.md"},
		{"module.bazel", []string{"MODULE.bazel"}, "module.go"},
		{"module.bazel.lock", []string{"MODULE.bazel.lock"}, "module.lock.md"},
		{"*.bzl", []string{"tools/defs.bzl"}, "tools/defs.py"},
		{".bazelrc", []string{".bazelrc"}, "bazelrc.md"},
		{".bazelversion", []string{".bazelversion"}, "bazelversion.md"},
		{"justfile", []string{"justfile", "Justfile"}, "docs/justfile.md"},
		{".justfile", []string{".justfile"}, "just.md"},
		{"*.just", []string{"ci.just"}, "ci.md"},
		{"taskfile.yml", []string{"Taskfile.yml"}, "tasks.yml"},
		{"taskfile.yaml", []string{"Taskfile.yaml"}, "tasks.yaml"},
		{"taskfile.dist.yml", []string{"Taskfile.dist.yml"}, "taskfile.md"},
		{"taskfile.dist.yaml", []string{"Taskfile.dist.yaml"}, "taskfile.txt"},
		{"rakefile", []string{"Rakefile"}, "rake.md"},
		{"*.rake", []string{"lib/tasks/db.rake"}, "lib/tasks/db.rb"},
		{"build.xml", []string{"build.xml"}, "layout.xml"},
		{"gradlew", []string{"gradlew"}, "gradle.md"},
		{"gradlew.bat", []string{"gradlew.bat"}, "run.bat"},
		{"*.gradle", []string{"gradle/deps.gradle"}, "gradle/README.md"},
		{"*.gradle.kts", []string{"buildSrc/conventions.gradle.kts"}, "buildSrc/src/Main.kt"},
		{"gradle-wrapper.properties", []string{"gradle/wrapper/gradle-wrapper.properties"}, "gradle/app.properties"},
		{"mvnw", []string{"mvnw"}, "mvn.md"},
		{"mvnw.cmd", []string{"mvnw.cmd"}, "mvn.cmd.md"},
		{".mvn", []string{".mvn/jvm.config", ".mvn/wrapper/maven-wrapper.properties"}, "mvn/jvm.config"},
		{"*.sbt", []string{"build.sbt", "project/plugins.sbt"}, "src/main/scala/Main.scala"},
		{"project/*.scala", []string{"project/Dependencies.scala"}, "app/project/Model.scala"},
		{"project/build.properties", []string{"project/build.properties"}, "src/build.properties"},
		{"sconstruct", []string{"SConstruct"}, "construct.md"},
		{"sconscript", []string{"src/SConscript"}, "src/script.py"},
		{"configure", []string{"configure"}, "src/configure.go"},
		{"configure.ac", []string{"configure.ac"}, "configure.md"},
		{"configure.in", []string{"configure.in"}, "configure.txt"},
		{"*.m4", []string{"m4/ax_check.m4", "aclocal.m4"}, "m4/README"},
		{"*.nix", []string{"flake.nix", "shell.nix", "nix/default.nix"}, "nix/README.md"},
		{"flake.lock", []string{"flake.lock"}, "flake.md"},
		{"vagrantfile", []string{"Vagrantfile"}, "vagrant.md"},
		{"procfile", []string{"Procfile"}, "process.md"},

		// Environment and toolchain selection, shell start-up files.
		{".envrc", []string{".envrc", "svc/.envrc"}, ".envrc.example.md"},
		{".tool-versions", []string{".tool-versions"}, "tool-versions.md"},
		{"mise*.toml", []string{"mise.toml", "mise.local.toml", ".config/mise.toml"}, "mise.md"},
		{".mise*.toml", []string{".mise.toml", ".mise.local.toml"}, "mise.txt"},
		{".mise", []string{".mise/config.toml", ".mise/tasks/build"}, "docs/mise.md"},
		{".profile", []string{".profile"}, "docs/profile.md"},
		{".bashrc", []string{".bashrc", "dotfiles/.bashrc"}, "dotfiles/bashrc.md"},
		{".bash_profile", []string{".bash_profile"}, "bash_profile"},
		{".bash_login", []string{".bash_login"}, "bash_login"},
		{".bash_logout", []string{".bash_logout"}, "bash_logout"},
		{".zshenv", []string{".zshenv"}, "zshenv"},
		{".zprofile", []string{".zprofile"}, "zprofile"},
		{".zshrc", []string{".zshrc"}, "zshrc.md"},
		{".zlogin", []string{".zlogin"}, "zlogin"},
		{".zlogout", []string{".zlogout"}, "zlogout"},

		// Package-manager configuration.
		{".cargo", []string{".cargo/config.toml", "crates/x/.cargo/config"}, "cargo/config.toml"},
		{"rust-toolchain", []string{"rust-toolchain"}, "toolchain.md"},
		{"rust-toolchain.toml", []string{"rust-toolchain.toml"}, "toolchain.toml"},
		{".pnpmfile.cjs", []string{".pnpmfile.cjs"}, "pnpmfile.cjs"},
		{".pnpmfile.mjs", []string{".pnpmfile.mjs"}, "pnpmfile.mjs"},
		{"pnpm-workspace.yaml", []string{"pnpm-workspace.yaml"}, "pnpm-workspace.md"},
		{".yarn", []string{".yarn/releases/yarn-4.1.0.cjs", ".yarn/plugins/x.cjs"}, "yarn/README.md"},
		{"bunfig.toml", []string{"bunfig.toml"}, "bun.toml"},
		{"pip.conf", []string{"pip.conf"}, "pip.md"},
		{"pip.ini", []string{"pip.ini"}, "pip.txt"},
		{".pypirc", []string{".pypirc"}, "pypirc.md"},
		{".condarc", []string{".condarc"}, "condarc.md"},
		{"environment.yml", []string{"environment.yml"}, "environments.yml"},
		{"environment.yaml", []string{"environment.yaml"}, "environment.md"},
		{"manifest.in", []string{"MANIFEST.in"}, "MANIFEST.md"},
		{"*.pth", []string{"site-packages/evil.pth"}, "site-packages/evil.py"},
		{"sitecustomize.py", []string{"sitecustomize.py"}, "customize.py"},
		{"usercustomize.py", []string{"usercustomize.py"}, "user.py"},

		// Test bootstraps and tool configurations that are code.
		{"conftest.py", []string{"conftest.py", "tests/unit/conftest.py"}, "tests/unit/test_a.py"},
		{"pytest.ini", []string{"pytest.ini"}, "pytest.md"},
		{"tox.ini", []string{"tox.ini"}, "tox.md"},
		{"noxfile.py", []string{"noxfile.py"}, "nox.py"},
		{"jest.config.*", []string{"jest.config.js", "web/jest.config.ts", "jest.config.json"}, "web/jest.setup.md"},
		{"vitest.config.*", []string{"vitest.config.ts"}, "src/vitest.md"},
		{"vitest.workspace.*", []string{"vitest.workspace.ts"}, "workspace.ts"},
		{"vite.config.*", []string{"web/vite.config.ts", "vite.config.mjs"}, "web/src/main.ts"},
		{"webpack.config.*", []string{"webpack.config.js"}, "webpack.md"},
		{"rollup.config.*", []string{"rollup.config.mjs"}, "rollup.md"},
		{"babel.config.*", []string{"babel.config.js"}, "babel.md"},
		{".babelrc*", []string{".babelrc", ".babelrc.js"}, "babelrc.md"},
		{"karma.conf.*", []string{"karma.conf.js"}, "karma.md"},
		{".mocharc*", []string{".mocharc.yml", ".mocharc.js"}, "mocharc.md"},
		{"playwright.config.*", []string{"playwright.config.ts"}, "e2e/login.spec.ts"},
		{"cypress.config.*", []string{"cypress.config.js"}, "cypress/e2e/a.cy.js"},
		{".eslintrc*", []string{".eslintrc", ".eslintrc.json", ".eslintrc.cjs"}, "eslintrc.md"},
		{"eslint.config.*", []string{"eslint.config.js", "eslint.config.mjs"}, "docs/eslint.md"},
		{".prettierrc*", []string{".prettierrc", ".prettierrc.js", ".prettierrc.json"}, ".prettierignore"},
		{"prettier.config.*", []string{"prettier.config.cjs"}, "prettier.md"},
		{"gruntfile.*", []string{"Gruntfile.js", "Gruntfile.coffee"}, "grunt.md"},
		{"gulpfile.*", []string{"gulpfile.js", "gulpfile.babel.js"}, "gulp.md"},
		{"postcss.config.*", []string{"postcss.config.js"}, "src/app.css"},
		{"tailwind.config.*", []string{"tailwind.config.ts"}, "tailwind.css"},
		{"next.config.*", []string{"next.config.mjs"}, "pages/index.tsx"},
		{"nuxt.config.*", []string{"nuxt.config.ts"}, "pages/index.vue"},
		{"svelte.config.*", []string{"svelte.config.js"}, "src/App.svelte"},
		{"astro.config.*", []string{"astro.config.mjs"}, "src/pages/index.astro"},

		// Editors' run configurations.
		{".idea", []string{".idea/runConfigurations/test.xml", ".idea/workspace.xml"}, "idea.md"},
		{".run", []string{".run/Server.run.xml"}, "run/server.go"},
		{"*.code-workspace", []string{"corral.code-workspace"}, "corral.code"},
		{".fleet", []string{".fleet/run.json"}, "fleet.md"},
		{".zed", []string{".zed/tasks.json"}, "zed.md"},
		{".vs", []string{".vs/tasks.vs.json"}, "vs.md"},
		{"*.sublime-project", []string{"corral.sublime-project"}, "corral.sublime"},
		{"*.sublime-build", []string{"Go.sublime-build"}, "Go.sublime"},

		// Git hooks and configuration.
		{".githooks", []string{".githooks/pre-push"}, "githooks.md"},
		{"lefthook.*", []string{"lefthook.yml", "lefthook.toml"}, "docs/lefthook-usage.md"},
		{".lefthook.*", []string{".lefthook.yml"}, "hooks.yml"},
		{"lefthook-local.*", []string{"lefthook-local.yml"}, "lefthook-local"},
		{".lefthook-local.*", []string{".lefthook-local.yaml"}, "local.yaml"},
		{".lefthook", []string{".lefthook/pre-commit/lint.sh"}, "hooks/lint.sh"},
		{".lefthook-local", []string{".lefthook-local/pre-commit/x.sh"}, "local/x.sh"},
		{".pre-commit-hooks.yaml", []string{".pre-commit-hooks.yaml"}, "pre-commit-hooks.yaml"},
		{".lintstagedrc*", []string{".lintstagedrc", ".lintstagedrc.json"}, "lintstagedrc.md"},
		{"lint-staged.config.*", []string{"lint-staged.config.js"}, "lint-staged.md"},
		{".gitconfig", []string{".gitconfig"}, "gitconfig.md"},
		{".lfsconfig", []string{".lfsconfig"}, "lfsconfig.md"},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.glob, func(t *testing.T) {
			if !slices.Contains(riskyGlobs, c.glob) {
				t.Fatalf("%q is not in riskyGlobs", c.glob)
			}
			for _, p := range c.risky {
				// The case must prove its own glob, not one of its neighbours in the list.
				if !glob.Match(c.glob, strings.ToLower(p)) {
					t.Errorf("glob.Match(%q, %q) = false", c.glob, strings.ToLower(p))
				}
				if got := Classify(file(p), ClassPolicy{}); got != ClassRisky {
					t.Errorf("Classify(%q) = %s, want %s", p, got, ClassRisky)
				}
			}
			if got := Classify(file(c.neighbour), ClassPolicy{}); got != ClassOrdinary {
				t.Errorf("Classify(%q) = %s, want %s", c.neighbour, got, ClassOrdinary)
			}
		})
		covered[c.glob] = true
	}
	for _, g := range riskyGlobs {
		if !covered[g] {
			t.Errorf("risky glob %q has no case in TestRiskyBuiltins", g)
		}
		// Paths are lowered before they meet the built-in list.
		if g != strings.ToLower(g) {
			t.Errorf("risky glob %q is not lower-case: it can never match", g)
		}
		if err := glob.Valid(g); err != nil {
			t.Errorf("risky glob: %v", err)
		}
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
		if got := glob.Match(c.glob, c.path); got != c.want {
			t.Errorf("glob.Match(%q, %q) = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
	for _, g := range []string{"", "/", "a//b", "a/../b", "[x", "./a"} {
		if glob.Valid(g) == nil {
			t.Errorf("glob.Valid(%q) = nil, want an error", g)
		}
	}
	for _, g := range []string{"*.pem", "/secrets/**", "a/[bc]/d"} {
		if err := glob.Valid(g); err != nil {
			t.Errorf("glob.Valid(%q) = %v", g, err)
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
