package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/app"
	"corral/internal/service"
	"corral/internal/store"
)

// TestNodeToken: `corral node token` prints a join token a node can join
// with, once.
func TestNodeToken(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	db, err := store.Open(ctx, app.DBPath(data)) // as control's first start does
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"node", "token", "--data", data}, nil, &stdout, &stderr, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	token := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(token, "cnj_") || strings.Contains(stderr.String(), token) {
		t.Fatalf("stdout %q, stderr %q: want the token on stdout only", stdout.String(), stderr.String())
	}
	nodes := service.NewEnrollment(db, service.NodesConfig{})
	if _, _, _, err := nodes.Join(ctx, token, "sandbox-a"); err != nil {
		t.Fatalf("join with the printed token: %v", err)
	}
	if _, _, _, err := nodes.Join(ctx, token, "sandbox-b"); err == nil {
		t.Fatal("the token worked twice")
	}
	if code := run(ctx, []string{"node", "tokens"}, nil, &stdout, &stderr, func(string) string { return "" }); code != 2 {
		t.Fatalf("an unknown node command exited %d, want 2", code)
	}
}

// TestNodeTokenRefuses: `corral node token` writes only into control's
// existing, migrated database: a mistyped --data, or a file no server has
// migrated, is refused saying what to do; where there is no database,
// nothing is created.
func TestNodeTokenRefuses(t *testing.T) {
	ctx := context.Background()
	empty := t.TempDir()
	if err := os.WriteFile(app.DBPath(empty), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, data, want string
	}{
		{"no such directory", filepath.Join(t.TempDir(), "typo"), "there is no Corral database at"},
		{"a directory without a database", t.TempDir(), "there is no Corral database at"},
		{"a file no server has migrated", empty, "is not a Corral database that a server has started on"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadDir(tc.data)
			var stdout, stderr bytes.Buffer
			code := run(ctx, []string{"node", "token", "--data", tc.data}, nil, &stdout, &stderr, func(string) string { return "" })
			if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q: want 1, nothing, %q", code, stdout.String(), stderr.String(), tc.want)
			}
			if after, _ := os.ReadDir(tc.data); len(before) == 0 && len(after) != 0 {
				t.Fatalf("%s held %d entries, and %d after", tc.data, len(before), len(after))
			}
		})
	}
}
