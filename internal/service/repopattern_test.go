package service

import (
	"testing"

	"corral"
)

func TestRepositoryPattern(t *testing.T) {
	for _, tt := range []struct {
		in, host, want string // want "" for an error
	}{
		{"github.com/acme/app", "github.com", "github.com/acme/app"},
		{"https://GitHub.com/acme/app.git", "github.com", "github.com/acme/app"},
		{"github.com:443/acme/*/", "github.com", "github.com/acme/*"},
		{"git.example.org:8443/team/app", "git.example.org:8443", "git.example.org:8443/team/app"},
		{"[::1]:8443/r", "[::1]:8443", "[::1]:8443/r"},
		{"gitlab.com/acme/app", "github.com", ""},
		{"git.example.org/team/app", "git.example.org:8443", ""},
		{"github.com", "github.com", ""},
		{"github.com/", "github.com", ""},
		{"github.com/a//b", "github.com", ""},
		{"github.com/a/../b", "github.com", ""},
		{"github.com/a/[b", "github.com", ""},
		{"github.com/a/b?x=1", "github.com", ""},
		{"ssh://github.com/a/b", "github.com", ""},
	} {
		got, err := RepositoryPattern(tt.in, tt.host)
		if tt.want == "" {
			if err == nil {
				t.Errorf("RepositoryPattern(%q, %q) = %q, want an error", tt.in, tt.host, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("RepositoryPattern(%q, %q) = %q, %v; want %q", tt.in, tt.host, got, err, tt.want)
		}
	}
}

func TestCredentialAllows(t *testing.T) {
	c := corral.CodeCredential{Host: "github.com", Repositories: []string{"github.com/acme/app", "github.com/lib/*"}}
	for _, tt := range []struct {
		url  string
		want bool
	}{
		{"https://github.com/acme/app", true},
		{"https://github.com/acme/app.git", true},
		{"https://GITHUB.COM:443/acme/app/", true},
		{"https://github.com/acme/other", false},
		{"https://github.com/acme/app/../other", false},
		{"https://github.com/acme/other/../app", true}, // the path the server reads
		{"https://github.com/lib/one", true},
		{"https://github.com/lib/one/two", false}, // * is one segment
		{"https://github.com/Acme/app", false},    // paths are compared as written
		{"https://github.com.evil.example/acme/app", false},
		{"https://github.com:8443/acme/app", false},
		{"http://github.com/acme/app", false},
		{"https://user@github.com/acme/app", false},
	} {
		if got := allows(c, tt.url); got != tt.want {
			t.Errorf("allows(%s) = %v, want %v", tt.url, got, tt.want)
		}
	}
	if allows(corral.CodeCredential{Host: "github.com"}, "https://github.com/acme/app") {
		t.Error("a credential with no repositories allows one")
	}
	v6 := corral.CodeCredential{Host: "[::1]:8443", Repositories: []string{"[::1]:8443/r"}}
	if !allows(v6, "https://[::1]:8443/r.git") || allows(v6, "https://[::2]:8443/r") {
		t.Error("an IPv6 host is not compared as it is")
	}
}
