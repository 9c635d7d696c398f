package retrieval

import "testing"

func TestExcluded(t *testing.T) {
	policy := []string{"secret/**", "*.pem"}
	for _, tc := range []struct {
		name string
		rule string // "" means not excluded
	}{
		// Instruction files of agent tools, in any case and at any depth.
		{"AGENTS.md", "agents.md"},
		{"docs/AGENTS.md", "agents.md"},
		{"agents.MD", "agents.md"},
		{"CLAUDE.md", "claude.md"},
		{"sub/dir/Claude.Local.md", "claude.local.md"},
		{"GEMINI.md", "gemini.md"},
		{".cursorrules", ".cursorrules"},
		{".claude/settings.json", ".claude"},
		{".github/copilot-instructions.md", "copilot-instructions.md"},
		{".github/instructions/go.instructions.md", ".github/instructions"},
		{".aider.conf.yml", ".aider*"},
		// Corral's own files, the repository's database, secrets.
		{".corral/x", ".corral"},
		{"project/.CORRAL/prompt.md", ".corral"},
		{"a/.git/config", ".git"},
		{".env", ".env"},
		{".env.local", ".env.*"},
		{"sub/.env.production", ".env.*"},
		{".envrc", ".envrc"},
		{"system-prompt.txt", "system-prompt*"},
		// The agent's own globs.
		{"secret/plan.md", "secret/**"},
		{"secret/deep/er/plan.md", "secret/**"},
		{"server.pem", "*.pem"},
		{"keys/server.pem", "*.pem"},
		// Not scaffolding: names that only look alike.
		{"README.md", ""},
		{"docs/agents-guide.md", ""},
		{"agents.md.txt", ""},
		{"environment.md", ""},
		{"my.env.md", ""},
		{".github/workflows/ci.yml", ""},
		{"gitignore-notes.md", ""},
		{".gitignore-notes.md", ""},
		{"docs/secret/plan.md", ""}, // "secret/**" is anchored at the root
		{"server.pem.md", ""},
		{"Secret/plan.md", ""}, // an agent's globs match case for case
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule, ex := Excluded(tc.name, policy)
			if ex != (tc.rule != "") || rule != tc.rule {
				t.Errorf("Excluded(%q, %q) = %q, %v; want %q, %v", tc.name, policy, rule, ex, tc.rule, tc.rule != "")
			}
		})
	}
}

func TestExcludedWithoutPolicy(t *testing.T) {
	for _, name := range []string{"secret/plan.md", "server.pem"} {
		if rule, ex := Excluded(name, nil); ex {
			t.Errorf("Excluded(%q, nil) = %q, true; want not excluded without a policy", name, rule)
		}
	}
}
