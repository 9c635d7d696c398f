package sanitize_test

import (
	"strings"
	"testing"

	"corral"
	"corral/internal/sanitize"
)

func TestID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{corral.NewID("agt"), true},
		{"agt_a", true},
		{"a", true},
		{"0", true},
		{"_", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"Agt_a", false}, // another spelling of agt_a on a case-insensitive disk
		{"agt-a", false},
		{"agt.a", false},
		{".", false},
		{"..", false},
		{"../x", false},
		{"agt/x", false},
		{"agt\\x", false},
		{"A B", false},
		{"agt_a\x00", false},
		{"agt_a\n", false},
		{"-agt", false},
		{"agt_é", false},
	}
	for _, tt := range tests {
		err := sanitize.ID("agent", tt.id)
		if (err == nil) != tt.ok {
			t.Errorf("ID(%q) = %v, want ok %v", tt.id, err, tt.ok)
		}
		if err != nil && (corral.ErrorCode(err) != corral.EINVALID || !strings.Contains(corral.ErrorMessage(err), "agent id")) {
			t.Errorf("ID(%q) = %v, want %s naming an agent id", tt.id, err, corral.EINVALID)
		}
	}
}

func TestCommandID(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"m3-0", true},
		{"cli-1", true},
		{"call_1", true},
		{"a.b", true},
		{"A", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{".", false},
		{"..", false},
		{".a", false},
		{"-a", false},
		{"_a", false},
		{"a/b", false},
		{"a b", false},
		{"a\x00", false},
		{"é", false},
	}
	for _, tt := range tests {
		err := sanitize.CommandID(tt.id)
		if (err == nil) != tt.ok {
			t.Errorf("CommandID(%q) = %v, want ok %v", tt.id, err, tt.ok)
		}
		if err != nil && corral.ErrorCode(err) != corral.EINVALID {
			t.Errorf("CommandID(%q) code %s, want %s", tt.id, corral.ErrorCode(err), corral.EINVALID)
		}
	}
}
