package pgtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestNewestBin(t *testing.T) {
	tests := []struct {
		name  string
		files []string // executables to make under the root
		want  string   // the directory chosen, relative to the root; "" for none
	}{
		{name: "none", want: ""},
		{name: "one", files: []string{"15/bin/initdb", "15/bin/postgres"}, want: "15/bin"},
		{name: "the highest", files: []string{"13/bin/initdb", "13/bin/postgres", "16/bin/initdb", "16/bin/postgres", "15/bin/initdb", "15/bin/postgres"}, want: "16/bin"},
		{name: "10 above 9.6", files: []string{"9.6/bin/initdb", "9.6/bin/postgres", "10/bin/initdb", "10/bin/postgres"}, want: "10/bin"},
		{name: "a version without postgres", files: []string{"15/bin/initdb", "15/bin/postgres", "17/bin/initdb"}, want: "15/bin"},
		{name: "not a version", files: []string{"15/bin/initdb", "15/bin/postgres", "latest/bin/initdb", "latest/bin/postgres"}, want: "15/bin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range tt.files {
				writeExecutable(t, filepath.Join(root, f))
			}
			want := ""
			if tt.want != "" {
				want = filepath.Join(root, tt.want)
			}
			if got := newestBin(root); got != want {
				t.Errorf("newestBin(%v) = %q, want %q", tt.files, got, want)
			}
		})
	}
}

func TestFindPrograms(t *testing.T) {
	tests := []struct {
		name       string
		onPath     []string // links on PATH to files under the root
		underRoot  []string // executables under the root
		wantInitdb string   // relative to the root; "" for errMissing
	}{
		{name: "nowhere", wantInitdb: ""},
		{name: "the newest under the root", underRoot: []string{"14/bin/initdb", "14/bin/postgres", "15/bin/initdb", "15/bin/postgres"}, wantInitdb: "15/bin/initdb"},
		{
			name:       "PATH before the root, with the postgres beside initdb's real file",
			underRoot:  []string{"14/bin/initdb", "14/bin/postgres", "15/bin/initdb", "15/bin/postgres"},
			onPath:     []string{"14/bin/initdb", "15/bin/postgres"},
			wantInitdb: "14/bin/initdb",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, path := t.TempDir(), t.TempDir()
			for _, f := range tt.underRoot {
				writeExecutable(t, filepath.Join(root, f))
			}
			for _, f := range tt.onPath {
				if err := os.Symlink(filepath.Join(root, f), filepath.Join(path, filepath.Base(f))); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", path)
			initdb, postgres, err := findPrograms(root)
			if tt.wantInitdb == "" {
				if !errors.Is(err, errMissing) {
					t.Errorf("findPrograms = %q, %q, %v; want errMissing", initdb, postgres, err)
				}
				return
			}
			want := filepath.Join(root, tt.wantInitdb)
			if wantPostgres := filepath.Join(filepath.Dir(want), "postgres"); err != nil || initdb != want || postgres != wantPostgres {
				t.Errorf("findPrograms = %q, %q, %v; want %q, %q", initdb, postgres, err, want, wantPostgres)
			}
		})
	}
}

// writeExecutable makes an executable file at p, and its directory.
func writeExecutable(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// recorder is a skipper that remembers how the test would have ended.
type recorder struct{ skipped, failed string }

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestSkip(t *testing.T) {
	const reason = "no PostgreSQL"
	tests := []struct {
		name          string
		env           string
		skipped, fail string
	}{
		{name: "unset skips", env: "", skipped: reason},
		{name: "0 skips", env: "0", skipped: reason},
		{name: "1 fails with the reason", env: "1", fail: "PostgreSQL is required here (CORRAL_REQUIRE_POSTGRES=1): " + reason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(Env, tt.env)
			r := &recorder{}
			skip(r, errors.New(reason))
			if r.skipped != tt.skipped || r.failed != tt.fail {
				t.Errorf("skip with %s=%q: skipped %q, failed %q; want skipped %q, failed %q", Env, tt.env, r.skipped, r.failed, tt.skipped, tt.fail)
			}
		})
	}
}
