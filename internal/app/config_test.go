package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
)

// TestConfigCheck: each validator refuses what it guards, in order, with
// an error that names the setting; a zero takes its default; paths come
// out absolute.
func TestConfigCheck(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := func(c *Config) {}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // "" for no error
		usage  bool   // the error is ErrConfig
	}{
		{"zero values take the defaults", ok, "", false},
		{"unknown role", func(c *Config) { c.Role = "everything" }, `unknown role "everything"`, false},
		{"sandbox without control", func(c *Config) { c.Role = "sandbox" }, "--role sandbox needs --control", true},
		{"sandbox with a control that is no URL", func(c *Config) { c.Role, c.Control = "sandbox", "ftp://x" }, "--control must be control's http or https URL", true},
		{"sandbox with control", func(c *Config) { c.Role, c.Control = "sandbox", "https://corral.example.org" }, "", false},
		{"sandbox with control replicas", func(c *Config) {
			c.Role, c.Control = "sandbox", "https://a.example.org,https://b.example.org"
		}, "", false},
		{"sandbox with a replica that is no URL", func(c *Config) {
			c.Role, c.Control = "sandbox", "https://a.example.org,ftp://b"
		}, "--control must be control's http or https URL", true},
		{"a database that is not PostgreSQL", func(c *Config) { c.Database = "mysql://x" }, "--db must be a postgres:// URL", true},
		{"a failover faster than a lease holds", func(c *Config) { c.FailoverAfter = time.Second }, "--failover-after must be at least 3s", true},
		{"a failover of 3 s", func(c *Config) { c.FailoverAfter = 3 * time.Second }, "", false},
		{"no data directory", func(c *Config) { c.Data = "" }, "--data must name a directory", true},
		{"a git CA that is not there", func(c *Config) { c.GitCAFile = ca + ".missing" }, "--git-ca-file", true},
		{"a git CA", func(c *Config) { c.GitCAFile = ca }, "", false},
		{"negative grace", func(c *Config) { c.SessionGrace = -1 }, "--session-grace must be positive", true},
		{"negative change TTL", func(c *Config) { c.ChangeTTL = -1 }, "--change-ttl must be positive", true},
		{"negative quarantine", func(c *Config) { c.QuarantineAfter = -1 }, "--quarantine-after", true},
		{"threshold above 1", func(c *Config) { c.RetrievalThreshold = 1.5 }, "--retrieval-threshold must be from 0 to 1", true},
		{"negative connections", func(c *Config) { c.MaxConnsPerAddr = -1 }, "--max-conns", true},
		{"negative sessions", func(c *Config) { c.MaxSessions = -1 }, "--max-sessions must not be negative", true},
		{"negative import size", func(c *Config) { c.Imports.MaxFiles = -1 }, "--import-max-files must be positive", true},
		{"negative pending disk", func(c *Config) { c.PendingDisk.Total = -1 }, "--pending-disk-total must be positive", true},
		{"negative tree tokens", func(c *Config) { c.Delegation.Tokens = -1 }, "--delegation-tokens must be 0 or more", true},
		{"an OTLP endpoint that is no URL", func(c *Config) { c.OTLPEndpoint = "127.0.0.1:4318" }, "--otlp-endpoint: the OTLP endpoint must be an http or https URL", true},
		{"an OTLP endpoint with credentials", func(c *Config) { c.OTLPEndpoint = "https://u:p@otel.example.org" }, "--otlp-endpoint: the OTLP endpoint must not carry credentials", true},
		{"an OTLP endpoint", func(c *Config) { c.OTLPEndpoint = "http://127.0.0.1:4318" }, "", false},
		{"the role first", func(c *Config) { c.Role, c.SessionGrace = "nope", -1 }, "unknown role", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Role: "all", Data: "relative/data", ToolsDir: "build/tools"}
			tt.change(&c)
			err := c.Check()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check() = %v, want nil", err)
				}
				for name, p := range map[string]string{"Data": c.Data, "ToolsDir": c.ToolsDir, "GitCAFile": c.GitCAFile} {
					if p != "" && !filepath.IsAbs(p) {
						t.Errorf("%s = %q after Check, want an absolute path", name, p)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check() = %v, want an error saying %q", err, tt.want)
			}
			if got := errors.Is(err, ErrConfig); got != tt.usage {
				t.Errorf("Check() = %v: a usage error (ErrConfig) = %v, want %v", err, got, tt.usage)
			}
			if !tt.usage && corral.ErrorCode(err) != corral.EINVALID {
				t.Errorf("Check() = %v, want EINVALID", err)
			}
		})
	}
}
