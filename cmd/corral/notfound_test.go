package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMachinePathsAnswerJSON404: the real server answers an unknown /api/
// path and every /v1/ path (the model gateway's, served only inside
// sandboxes) with the API's JSON 404, for any method, never with the web
// app's page; the app's own routes still get the page.
func TestMachinePathsAnswerJSON404(t *testing.T) {
	srv := startServer(t, reachableTempDir(t))
	tests := []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/models", 404},
		{"POST", "/v1/chat/completions", 404},
		{"DELETE", "/v1/messages", 404},
		{"GET", "/v1", 404}, // redirected to /v1/
		{"GET", "/api/nothing-here", 404},
		{"PATCH", "/api/nothing-here", 404},
		{"GET", "/agents/agt_1", 200},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.base+tt.path, strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, res.StatusCode, body, tt.status)
			}
			if tt.status == 200 {
				if !strings.Contains(string(body), "<html") {
					t.Fatalf("%s %s = %q, want the app's page", tt.method, tt.path, body)
				}
				return
			}
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" || json.Unmarshal(body, &e) != nil || e.Error.Code != "not_found" {
				t.Fatalf("%s %s = %s %q, want the API's JSON not_found", tt.method, tt.path, ct, body)
			}
		})
	}
}
