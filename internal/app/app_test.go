package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"corral/internal/pgtest"
	"corral/internal/supervisor"
)

// TestMain lets the test binary act as the sessions' supervisor, as the
// server binary does.
func TestMain(m *testing.M) {
	supervisor.Dispatch()
	os.Exit(pgtest.Main(m))
}

// TestNewBuildsEveryPart: role all built through New has every part a
// server serves with, none left for a setter; its handler answers 503
// until it is opened; Close lets the next server take the data directory,
// and a second one on it meanwhile is refused having touched nothing.
func TestNewBuildsEveryPart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	ctx := context.Background()
	a, err := New(ctx, Config{Role: "all", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Close() }()
	parts := map[string]bool{
		"Store": a.Store != nil, "Node": a.Node != nil, "Model": a.Model != nil, "Runner": a.Runner != nil,
		"Accounts": a.Accounts != nil, "Agents": a.Agents != nil, "Admissions": a.Admissions != nil, "Runs": a.Runs != nil,
		"Stages": a.Stages != nil, "Decisions": a.Decisions != nil, "Files": a.Files != nil, "Repositories": a.Repositories != nil, "Delegation": a.Delegation != nil, "Documents": a.Documents != nil,
		"Credentials": a.Credentials != nil, "Models": a.Models != nil, "Stores": a.Stores != nil, "API": a.API != nil,
	}
	for name, built := range parts {
		if !built {
			t.Errorf("role all: %s was not built", name)
		}
	}
	if a.Fleet != nil || a.Router != nil || a.Nodes != nil || a.Enrollment != nil {
		t.Error("role all built control's parts for nodes")
	}

	get := func(path string) int {
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code
	}
	if code := get("/api/setup"); code != http.StatusServiceUnavailable {
		t.Fatalf("before Open: GET /api/setup = %d, want 503", code)
	}
	a.Open()
	if code := get("/api/setup"); code != http.StatusOK {
		t.Fatalf("after Open: GET /api/setup = %d, want 200", code)
	}
	if err := a.Ready(); err == nil {
		t.Error("Ready() = nil with no model provider configured")
	}

	if _, err := New(ctx, Config{Role: "all", Data: data}); !errors.Is(err, errDataDirInUse) {
		t.Fatalf("a second server on the data directory: %v, want errDataDirInUse", err)
	}
	a.Close()
	if a, err = New(ctx, Config{Role: "all", Data: data}); err != nil {
		t.Fatalf("after Close, the next server: %v", err)
	}
}

// TestRunNeedsAnAddress: an App built without an address serves only
// through Handler.
func TestRunNeedsAnAddress(t *testing.T) {
	a, err := New(context.Background(), Config{Role: "all", Data: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Run(context.Background(), nil); !errors.Is(err, errNoListener) {
		t.Fatalf("Run without an address = %v, want errNoListener", err)
	}
}
