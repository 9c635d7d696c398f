package sanitize_test

import (
	"strings"
	"testing"

	"corral"
	"corral/internal/sanitize"
)

func TestHost(t *testing.T) {
	tests := []struct {
		in, want string // want "" for an error
	}{
		{"github.com", "github.com"},
		{"GitHub.COM.:443", "github.com"},
		{"git.example.org:8443", "git.example.org:8443"},
		{"localhost", "localhost"},
		{"10.0.0.5", "10.0.0.5"},
		{"10.0.0.5:3000", "10.0.0.5:3000"},
		{"::1", "[::1]"},
		{"[::1]", "[::1]"},
		{"[::1]:8443", "[::1]:8443"},
		{"[::1]:443", "[::1]"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"", ""},
		{strings.Repeat("a", 301), ""},
		{strings.Repeat("a.", 127) + "aa", ""}, // 256 bytes: past DNS's 253
		{strings.Repeat("a", 64) + ".com", ""}, // a label past 63 bytes
		{"https://github.com", ""},
		{"github.com/alice", ""},
		{"alice@github.com", ""},
		{"github.com?x", ""},
		{"github.com#x", ""},
		{"git\\hub.com", ""},
		{"git hub.com", ""},
		{"github.com\n", ""},
		{"github.com:0", ""},
		{"github.com:65536", ""},
		{"github.com:0443", ""},
		{"github.com:", ""},
		{"github.com:x", ""},
		{"-github.com", ""},
		{"github-.com", ""},
		{"git_hub.com", ""},
		{"a..b", ""},
		{"1.2.3", ""}, // read as an address by some resolvers
		{"fe80::1%en0", ""},
		{"0\xc30", ""}, // IDNA would make xn--00-gg4n of it, and refuse that
		{"[fe80::1%25en0]", ""},
	}
	for _, tt := range tests {
		got, err := sanitize.Host(tt.in)
		if tt.want == "" {
			if err == nil || corral.ErrorCode(err) != corral.EINVALID {
				t.Errorf("Host(%q) = %q, %v; want %s", tt.in, got, err, corral.EINVALID)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Host(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestRepositoryURL(t *testing.T) {
	tests := []struct {
		name, url string
		ok        bool
	}{
		{"https", "https://example.com/team/repo.git", true},
		{"https with port", "https://git.example.com:8443/repo", true},
		{"upper case host", "https://GitHub.com/acme/app.git", true},
		{"ip host", "https://127.0.0.1:9/repo.git", true},
		{"ipv6 host", "https://[::1]:9/repo.git", true},
		{"http", "http://example.com/repo.git", false},
		{"ssh", "ssh://git@example.com/repo.git", false},
		{"scp form", "git@example.com:team/repo.git", false},
		{"file", "file:///etc/passwd", false},
		{"ext transport", "ext::sh -c touch% /tmp/x", false},
		{"userinfo with password", "https://user:pass@example.com/repo.git", false},
		{"userinfo user only", "https://token@example.com/repo.git", false},
		{"no host", "https:///repo.git", false},
		{"underscore host", "https://bad_host.example.com/repo", false},
		{"option-looking host", "https://-oProxy.example.com/repo", false},
		{"non-ASCII host", "https://bücher.example/repo", false},
		{"numeric name", "https://1.2.3/repo", false},
		{"zone", "https://[fe80::1%25en0]/repo", false},
		{"query", "https://example.com/repo.git?x=1", false},
		{"fragment", "https://example.com/repo.git#main", false},
		{"newline", "https://example.com/re\npo", false},
		{"backslash", "https://example.com/re%5Cpo", false},
		{"bad port", "https://example.com:99999/repo", false},
		{"too long", "https://example.com/" + strings.Repeat("a", 2048), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sanitize.RepositoryURL(tt.url)
			if (err == nil) != tt.ok {
				t.Fatalf("RepositoryURL(%q) = %v, want ok %v", tt.url, err, tt.ok)
			}
			if err != nil && corral.ErrorCode(err) != corral.EINVALID {
				t.Fatalf("RepositoryURL(%q) code = %s, want %s", tt.url, corral.ErrorCode(err), corral.EINVALID)
			}
		})
	}
}

func TestServerURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://corral.example.org", true},
		{"http://127.0.0.1:11434/v1", true},
		{"http://my_service:8080", true}, // a container's name, not a DNS name
		{"ftp://x", false},
		{"corral.example.org", false},
		{"https://", false},
		{"https:///x", false},
		{"://x", false},
		{"", false},
	}
	for _, tt := range tests {
		_, err := sanitize.ServerURL(tt.url)
		if (err == nil) != tt.ok {
			t.Errorf("ServerURL(%q) = %v, want ok %v", tt.url, err, tt.ok)
		}
		if err != nil && corral.ErrorCode(err) != corral.EINVALID {
			t.Errorf("ServerURL(%q) code = %s, want %s", tt.url, corral.ErrorCode(err), corral.EINVALID)
		}
	}
}
