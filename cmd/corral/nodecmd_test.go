package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"corral/internal/service"
	"corral/internal/store/sqlite"
)

// TestNodeToken: `corral node token` prints a join token a node can join
// with, once.
func TestNodeToken(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"node", "token", "--data", data}, nil, &stdout, &stderr, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	token := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(token, "cnj_") || strings.Contains(stderr.String(), token) {
		t.Fatalf("stdout %q, stderr %q: want the token on stdout only", stdout.String(), stderr.String())
	}
	db, err := sqlite.Open(ctx, dbPath(data))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	nodes := service.NewNodes(db, service.NodesConfig{})
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
