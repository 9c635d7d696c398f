package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/archive"
	"corral/internal/gitrepo"
)

// TestServeProjectFlags: the import limits, the clone limit and the git
// CA file, from flags and the environment, refused when they make no sense.
func TestServeProjectFlags(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defaults := archive.Limits{}.WithDefaults()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		imports archive.Limits
		clone   int64
		ca      string
		err     string // a substring of the error; "" for none
	}{
		{name: "defaults", imports: defaults, clone: gitrepo.DefaultMaxBytes},
		{name: "flags", args: []string{"--import-max-files", "10", "--import-max-bytes", "2048", "--clone-max-bytes", "4096", "--git-ca-file", ca},
			imports: archive.Limits{MaxFiles: 10, MaxDirs: defaults.MaxDirs, MaxBytes: 2048, MaxFileSize: defaults.MaxFileSize, MaxArchive: defaults.MaxArchive, MaxNameBytes: defaults.MaxNameBytes}, clone: 4096, ca: ca},
		{name: "environment", env: map[string]string{"CORRAL_IMPORT_MAX_FILE_SIZE": "100", "CORRAL_IMPORT_MAX_ARCHIVE": "200", "CORRAL_GIT_CA_FILE": ca},
			imports: archive.Limits{MaxFiles: defaults.MaxFiles, MaxDirs: defaults.MaxDirs, MaxBytes: defaults.MaxBytes, MaxFileSize: 100, MaxArchive: 200, MaxNameBytes: defaults.MaxNameBytes}, clone: gitrepo.DefaultMaxBytes, ca: ca},
		{name: "not a number", env: map[string]string{"CORRAL_IMPORT_MAX_FILES": "many"}, err: "CORRAL_IMPORT_MAX_FILES"},
		{name: "zero", args: []string{"--clone-max-bytes", "0"}, err: "--clone-max-bytes must be positive"},
		{name: "missing CA file", args: []string{"--git-ca-file", filepath.Join(t.TempDir(), "none.pem")}, err: "--git-ca-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServe(tt.args, io.Discard, func(k string) string { return tt.env[k] })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseServe(%q) error = %v, want one saying %q", tt.args, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServe(%q): %v", tt.args, err)
			}
			if got := c.Imports.WithDefaults(); got != tt.imports || c.CloneMaxBytes != tt.clone || c.GitCAFile != tt.ca {
				t.Fatalf("parseServe(%q) = imports %+v, clone %d, CA %q; want %+v, %d, %q", tt.args, got, c.CloneMaxBytes, c.GitCAFile, tt.imports, tt.clone, tt.ca)
			}
		})
	}
}
