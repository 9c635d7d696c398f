package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestCapOutput(t *testing.T) {
	fields := []string{"max_tokens", "max_completion_tokens"}
	for _, tt := range []struct {
		name, body string
		want       map[string]any // nil: the body comes back as it was
		err        bool
	}{
		{"none: the first is added", `{"model":"m"}`, map[string]any{"model": "m", "max_tokens": 100.0}, false},
		{"within the limit", `{"max_tokens":50}`, nil, false},
		{"at the limit", `{"max_completion_tokens":100}`, nil, false},
		{"above it", `{"max_tokens":101}`, map[string]any{"max_tokens": 100.0}, false},
		{"the other field above it", `{"max_completion_tokens":1e9}`, map[string]any{"max_completion_tokens": 100.0}, false},
		{"both, one above", `{"max_tokens":5,"max_completion_tokens":500}`, map[string]any{"max_tokens": 5.0, "max_completion_tokens": 100.0}, false},
		{"zero", `{"max_tokens":0}`, map[string]any{"max_tokens": 100.0}, false},
		{"negative", `{"max_tokens":-3}`, map[string]any{"max_tokens": 100.0}, false},
		{"not a number", `{"max_tokens":"lots"}`, map[string]any{"max_tokens": 100.0}, false},
		{"a fraction", `{"max_tokens":1.5}`, map[string]any{"max_tokens": 100.0}, false},
		{"null is none", `{"max_tokens":null}`, map[string]any{"max_tokens": 100.0}, false},
		{"not an object", `[1]`, nil, true},
	} {
		got, err := CapOutput([]byte(tt.body), 100, fields...)
		if tt.err {
			if err == nil {
				t.Errorf("%s: no error", tt.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if tt.want == nil {
			if string(got) != tt.body {
				t.Errorf("%s: %s, want the body unchanged", tt.name, got)
			}
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(got, &obj); err != nil || !reflect.DeepEqual(obj, tt.want) {
			t.Errorf("%s: %s, want %v", tt.name, got, tt.want)
		}
	}
}
