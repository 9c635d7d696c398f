package workspace

import (
	"path"
	"slices"
	"strings"

	"corral/internal/glob"
	"corral/internal/sanitize"
)

// ClassPolicy is what classification needs of an agent.
type ClassPolicy struct {
	Protected []string // extra globs that are protected
	Risky     []string // extra globs that are risky
	LargeFile int64    // risky above this many bytes; 0 = 1 MiB
}

// DefaultLargeFile is the size above which a file is risky when the policy
// sets none.
const DefaultLargeFile = 1 << 20

// Built-in protected globs: never applied, whatever the policy.
var protectedGlobs = []string{
	".git",     // the repository's own database and hooks, at any depth (submodules)
	".env",     // secrets, at any depth
	".env.*",   // .env.local, .env.production, ...
	"/.corral", // Corral's internal files, at the root
}

// Built-in risky globs: they wait for a person even in auto mode. Each names
// a file that some tool reads or runs on its own, so that a change to it runs
// code at the next build, test, install, commit, checkout or shell without
// anybody running that file by name. The list is lower-case (paths are
// lowered before they are matched). A glob without a slash matches a name at
// any depth and covers a directory of that name (see package glob): that is what
// ".idea" or ".cargo" want, and the price of "build" and "workspace": Bazel's
// BUILD and WORKSPACE cannot be told from a build/ or workspace/ directory,
// whose files are then risky too (they are often build scripts or outputs,
// worth a look either way).
var riskyGlobs = []string{
	// CI, workflows and things other tools run on their own.
	".github", ".gitlab", ".gitlab-ci.yml", ".circleci", "jenkinsfile", ".travis.yml",
	"azure-pipelines.yml", ".buildkite", "bitbucket-pipelines.yml", ".drone.yml",
	".woodpecker.yml", ".woodpecker", ".gitmodules", ".gitattributes", ".husky",
	".pre-commit-config.yaml", ".devcontainer", ".vscode",
	"dockerfile", "dockerfile.*", "*.dockerfile", "docker-compose*.yml", "docker-compose*.yaml",
	"compose.yml", "compose.yaml",
	// Dependency manifests and lockfiles.
	"go.mod", "go.sum", "go.work", "go.work.sum",
	"package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml",
	"bun.lockb", ".npmrc", ".yarnrc", ".yarnrc.yml",
	"requirements*.txt", "pipfile", "pipfile.lock", "poetry.lock", "pyproject.toml", "setup.py",
	"setup.cfg", "uv.lock",
	"cargo.toml", "cargo.lock",
	"gemfile", "gemfile.lock", "*.gemspec",
	"composer.json", "composer.lock",
	"pom.xml", "build.gradle*", "settings.gradle*", "gradle.properties",
	"*.csproj", "packages.config", "directory.packages.props", "nuget.config",
	"deno.json", "deno.jsonc", "deno.lock",

	// Build files: make, CMake, Meson, Cargo's build script, Bazel, task
	// runners, the JVM's wrappers (they download and run the build tool
	// their properties name), sbt, SCons, autotools, Nix.
	"makefile", "gnumakefile", "*.mk", "*.mak", "makefile.am", "makefile.in",
	"cmakelists.txt", "*.cmake", "cmakepresets.json", "cmakeuserpresets.json",
	"meson.build", "meson_options.txt", "meson.options",
	"build.rs",
	"build", "build.bazel", "workspace", "workspace.bazel", "workspace.bzlmod",
	"module.bazel", "module.bazel.lock", "*.bzl", ".bazelrc", ".bazelversion",
	"justfile", ".justfile", "*.just", "taskfile.yml", "taskfile.yaml", "taskfile.dist.yml",
	"taskfile.dist.yaml", "rakefile", "*.rake",
	"build.xml", "gradlew", "gradlew.bat", "*.gradle", "*.gradle.kts", "gradle-wrapper.properties",
	"mvnw", "mvnw.cmd", ".mvn",
	"*.sbt", "project/*.scala", "project/build.properties", // sbt's project/ is at the build's root
	"sconstruct", "sconscript",
	"configure", "configure.ac", "configure.in", "*.m4",
	"*.nix", "flake.lock",
	"vagrantfile", "procfile",

	// Environment and toolchain selection: direnv runs .envrc on cd; asdf
	// and mise pick (or build) the binaries that run, and mise runs hooks
	// and tasks.
	".envrc", ".tool-versions", "mise*.toml", ".mise*.toml", ".mise",
	// Shell start-up files: rare in a project, but when a workspace is a
	// home directory or a dotfiles repository, every new shell runs them.
	".profile", ".bashrc", ".bash_profile", ".bash_login", ".bash_logout",
	".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout",

	// Package-manager configuration: registries, hooks and code run at
	// install. Python runs the import lines of a .pth file, and
	// sitecustomize/usercustomize, at every start.
	".cargo", "rust-toolchain", "rust-toolchain.toml",
	".pnpmfile.cjs", ".pnpmfile.mjs", "pnpm-workspace.yaml", ".yarn", "bunfig.toml",
	"pip.conf", "pip.ini", ".pypirc", ".condarc", "environment.yml", "environment.yaml",
	"manifest.in", "*.pth", "sitecustomize.py", "usercustomize.py",

	// Test bootstraps, and tool configurations that are code (JavaScript
	// configs are modules the tool runs; a JSON or YAML one can still name a
	// plugin the tool loads).
	"conftest.py", "pytest.ini", "tox.ini", "noxfile.py",
	"jest.config.*", "vitest.config.*", "vitest.workspace.*", "vite.config.*",
	"webpack.config.*", "rollup.config.*", "babel.config.*", ".babelrc*",
	"karma.conf.*", ".mocharc*", "playwright.config.*", "cypress.config.*",
	".eslintrc*", "eslint.config.*", ".prettierrc*", "prettier.config.*",
	"gruntfile.*", "gulpfile.*",
	"postcss.config.*", "tailwind.config.*", "next.config.*", "nuxt.config.*",
	"svelte.config.*", "astro.config.*",

	// Editors' run configurations, tasks and launchers.
	".idea", ".run", "*.code-workspace", ".fleet", ".zed", ".vs",
	"*.sublime-project", "*.sublime-build",

	// Git hooks and the configuration git or its tools read from the tree
	// (.git itself is protected, above).
	".githooks", "lefthook.*", ".lefthook.*", "lefthook-local.*", ".lefthook-local.*",
	".lefthook", ".lefthook-local", ".pre-commit-hooks.yaml", ".lintstagedrc*",
	"lint-staged.config.*", ".gitconfig", ".lfsconfig",
}

// Classify says whether one change is ordinary, risky or protected. It is a
// pure function of the entry and the policy, in this order:
//
//   - protected: the entry carries any Flag but FlagCollision; its path is
//     not a clean relative path, or an element of it breaks the path rules
//     (sanitize.StoredPath: the one path validator), or its Op is unknown
//     (fail closed); it is .git or under
//     it, .env or .env.* at any depth, .corral at the root (any case), or it
//     matches a policy.Protected glob;
//   - risky: a delete; a modify that changes the mode (permissions, type or
//     setuid bits); an executable (any x bit); a name that collides with
//     another where names are folded (FlagCollision); a CI, workflow or container
//     file, a dependency manifest or lockfile, or a file a toolchain runs on
//     its own (riskyGlobs); larger than policy.LargeFile; a policy.Risky glob;
//   - ordinary otherwise.
//
// The manifest may already have set e.Class as a floor that Classify never
// lowers: ClassRisky for a binary file (a NUL byte in its first 8 KiB: a
// fact about content the entry has no field for) and ClassProtected for a
// write to a path hidden from the run as a secret. An unknown class in
// e.Class counts as risky. Because of that floor, classify a manifest once,
// fresh from Stage.Manifest: re-classifying under a laxer policy keeps the
// stricter class.
func Classify(e Entry, p ClassPolicy) string {
	if isProtected(e, p) || e.Class == ClassProtected {
		return ClassProtected
	}
	if isRisky(e, p) {
		return ClassRisky
	}
	switch e.Class {
	case "", ClassOrdinary:
		return ClassOrdinary
	default:
		return ClassRisky
	}
}

// ClassifyAll returns m with Class set on each entry. m itself is left as
// it was.
func ClassifyAll(m Manifest, p ClassPolicy) Manifest {
	out := make(Manifest, len(m))
	for i, e := range m {
		e.Class = Classify(e, p)
		out[i] = e
	}
	return out
}

func isProtected(e Entry, p ClassPolicy) bool {
	if hasProtectingFlag(e.Flags) || !cleanRelPath(e.Path) {
		return true
	}
	if rule, _ := sanitize.StoredPath(e.Path); rule != "" {
		return true // the one path validator: a name a person could not upload
	}
	switch e.Op {
	case OpCreate, OpModify, OpDelete:
	default:
		return true
	}
	return matchAny(protectedGlobs, strings.ToLower(e.Path)) || matchAny(p.Protected, e.Path)
}

func isRisky(e Entry, p ClassPolicy) bool {
	switch {
	case e.Op == OpDelete:
		return true
	case e.Op == OpModify && e.OldMode != e.Mode:
		return true
	case e.Mode.Type() == 0 && e.Mode&0o111 != 0:
		return true
	case slices.Contains(e.Flags, FlagCollision):
		return true
	}
	limit := p.LargeFile
	if limit <= 0 {
		limit = DefaultLargeFile
	}
	if e.Size > limit {
		return true
	}
	return matchAny(riskyGlobs, strings.ToLower(e.Path)) || matchAny(p.Risky, e.Path)
}

// cleanRelPath reports whether p is a path a manifest may hold: relative,
// slash-separated, clean, inside the root, not the root itself.
func cleanRelPath(p string) bool {
	if p == "" || p == "." || strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.ContainsRune(p, 0) {
		return false
	}
	return p != ".." && !strings.HasPrefix(p, "../")
}

func matchAny(globs []string, p string) bool {
	for _, g := range globs {
		if glob.Match(g, p) {
			return true
		}
	}
	return false
}
