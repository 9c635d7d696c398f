package node

import (
	"reflect"
	"testing"
)

func TestSplitLines(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"hello\n", []string{"hello\n"}},
		{"a\nb\n", []string{"a\n", "b\n"}},
		{"a\nb", []string{"a\n", "b\n"}},
		{"\n", []string{"\n"}},
		{"\n\n", []string{"\n", "\n"}},
	}
	for _, tt := range tests {
		got := splitLines(tt.in)
		if len(got) == 0 {
			got = nil
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitLines(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
