package service

import (
	"testing"

	"corral/internal/sanitize"
)

func TestSuggestedBranch(t *testing.T) {
	for _, tt := range []struct {
		name, id, agent, want string
	}{
		{"plain", "agt_abcdefghij", "Repo Worker", "corral/repo-worker-abcdef"},
		{"collapsed", "agt_x2y3z4w5", "  --Fix__the   BUILD!! ", "corral/fix-the-build-x2y3z4"},
		{"not ascii", "agt_q1w2e3r4", "Café ☕ bot", "corral/caf-bot-q1w2e3"},
		{"nothing left", "agt_q1w2e3r4", "☕☕", "corral/agent-q1w2e3"},
		{"bounded", "agt_mnopqrstuv", "a very long agent name that goes on and on and on", "corral/a-very-long-agent-name-that-goes-on-and-o-mnopqr"},
		{"git's forbidden", "agt_aaaaaa", "x..y.lock~^:?*[\\@{", "corral/x-y-lock-aaaaaa"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := SuggestedBranch(tt.id, tt.agent)
			if got != tt.want {
				t.Fatalf("SuggestedBranch(%q, %q) = %q, want %q", tt.id, tt.agent, got, tt.want)
			}
			if err := sanitize.Branch(got); err != nil {
				t.Fatalf("SuggestedBranch(%q, %q) = %q, not a branch: %v", tt.id, tt.agent, got, err)
			}
		})
	}
}

func TestPullRequestURL(t *testing.T) {
	for _, tt := range []struct {
		name, repo, base, branch, want string
	}{
		{"github", "https://github.com/acme/app.git", "main", "corral/fix-1", "https://github.com/acme/app/compare/main...corral/fix-1?expand=1"},
		{"github without .git, case kept in the path", "https://GitHub.com/Acme/App/", "main", "x", "https://github.com/Acme/App/compare/main...x?expand=1"},
		{"github, no base", "https://github.com/acme/app", "", "x", "https://github.com/acme/app/compare/x?expand=1"},
		{"github, escaped", "https://github.com/acme/app", "release#1", "feat/a b%", "https://github.com/acme/app/compare/release%231...feat/a%20b%25?expand=1"},
		{"github, not owner/repo", "https://github.com/acme", "main", "x", ""},
		{"gitlab.com, nested groups", "https://gitlab.com/g/sub/app.git", "main", "corral/x",
			"https://gitlab.com/g/sub/app/-/merge_requests/new?merge_request%5Bsource_branch%5D=corral%2Fx&merge_request%5Btarget_branch%5D=main"},
		{"self-hosted gitlab with a port", "https://gitlab.example.com:8443/team/app.git", "dev", "b&c",
			"https://gitlab.example.com:8443/team/app/-/merge_requests/new?merge_request%5Bsource_branch%5D=b%26c&merge_request%5Btarget_branch%5D=dev"},
		{"gitea", "https://gitea.example.org/o/r.git", "main", "corral/x", "https://gitea.example.org/o/r/compare/main...corral/x"},
		{"codeberg", "https://codeberg.org/o/r", "main", "x", "https://codeberg.org/o/r/compare/main...x"},
		{"forgejo", "https://forgejo.example.org/o/r", "main", "x", "https://forgejo.example.org/o/r/compare/main...x"},
		{"gitea, no base", "https://codeberg.org/o/r", "", "x", ""},
		{"bitbucket", "https://bitbucket.org/o/r.git", "main", "corral/x", "https://bitbucket.org/o/r/pull-requests/new?source=corral%2Fx&dest=main"},
		{"unknown host", "https://git.example.com/o/r.git", "main", "x", ""},
		{"the branch is the base", "https://github.com/acme/app", "main", "main", ""},
		{"no branch", "https://github.com/acme/app", "main", "", ""},
		{"not https", "http://github.com/acme/app", "main", "x", ""},
		{"dot segments", "https://github.com/acme/..", "main", "x", ""},
		{"not a URL", "://", "main", "x", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := PullRequestURL(tt.repo, tt.base, tt.branch); got != tt.want {
				t.Fatalf("PullRequestURL(%q, %q, %q) = %q, want %q", tt.repo, tt.base, tt.branch, got, tt.want)
			}
		})
	}
}
