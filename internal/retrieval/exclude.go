package retrieval

import (
	"path"
	"strings"

	"corral/internal/glob"
)

// scaffolding is what retrieval never indexes nor answers, matched in any
// case against every element of a document's name: Corral's own files,
// the repository's database, secrets, and the files agent tools read as
// instructions (a document is data; an instruction file retrieved into a
// prompt is an instruction smuggled past the person who wrote the
// agent's). Globs without a slash match a name at any depth and cover a
// directory of that name (package glob).
var scaffolding = []string{
	".corral", ".git", ".env", ".env.*", ".envrc",
	// Instruction files of agent tools: Codex, Claude Code, OpenCode,
	// Cursor, Windsurf, Cline, Gemini, Copilot, Aider, and the generic one.
	"agents.md", "agent.md", "agents.override.md", "claude.md", "claude.local.md", "gemini.md",
	".claude", ".codex", ".opencode", "opencode.json", "opencode.jsonc",
	".cursorrules", ".cursor", ".windsurfrules", ".windsurf", ".clinerules", ".roo", ".roomodes",
	".aider*", "copilot-instructions.md", ".github/instructions", ".github/prompts",
	// Corral's own prompts, should one ever be uploaded.
	"system-prompt*", "system_prompt*",
}

// Excluded says whether a document named name (a slash-separated relative
// path) must be left out: one of Corral's scaffolding files above, or a
// match of one of the agent's own exclusion globs (its policy's secret
// globs, matched case for case like everywhere else). It returns the rule
// that matched, for the error.
func Excluded(name string, policy []string) (rule string, excluded bool) {
	lower := strings.ToLower(path.Clean("/" + name))[1:]
	for _, g := range scaffolding {
		if glob.Match(g, lower) {
			return g, true
		}
	}
	for _, g := range policy {
		if glob.Match(g, name) {
			return g, true
		}
	}
	return "", false
}
