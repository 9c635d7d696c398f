package trace

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// chain builds a valid trace of n events for run.
func chain(run string, n int) []Event {
	var evs []Event
	prev := ""
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := 1; i <= n; i++ {
		e := Event{RunID: run, Seq: int64(i), At: at.Add(time.Duration(i) * time.Millisecond), Type: ToolCall,
			Data: json.RawMessage(`{"tool":"shell","command":"echo ` + strings.Repeat("x", i) + `"}`), PrevHash: prev}
		e.Hash = HashOf(e)
		prev = e.Hash
		evs = append(evs, e)
	}
	return evs
}

func TestVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name   string
		tamper func([]Event) []Event
		want   string // substring of the error; "" for valid
	}{
		{"intact", func(e []Event) []Event { return e }, ""},
		{"empty", func([]Event) []Event { return nil }, ""},
		{"flipped byte in data", func(e []Event) []Event {
			b := []byte(e[2].Data)
			b[5] ^= 0x01
			e[2].Data = b
			return e
		}, "event 3 does not match its hash"},
		{"changed type", func(e []Event) []Event { e[1].Type = Message; return e }, "event 2 does not match"},
		{"changed time", func(e []Event) []Event { e[4].At = e[4].At.Add(time.Nanosecond); return e }, "event 5 does not match"},
		{"deleted event", func(e []Event) []Event { return append(e[:2], e[3:]...) }, "event 3 has sequence number 4"},
		{"reordered events", func(e []Event) []Event { e[1], e[2] = e[2], e[1]; return e }, "event 2 has sequence number 3"},
		{"renumbered after a deletion", func(e []Event) []Event {
			e = append(e[:2], e[3:]...)
			for i := range e {
				e[i].Seq = int64(i + 1)
			}
			return e
		}, "event 3 does not follow event 2"},
		{"forged event with its own hash", func(e []Event) []Event {
			e[3].Data = json.RawMessage(`{"forged":true}`)
			e[3].Hash = HashOf(e[3])
			return e
		}, "event 5 does not follow event 4"},
		{"first event claims a predecessor", func(e []Event) []Event {
			e[0].PrevHash = "00"
			e[0].Hash = HashOf(e[0])
			return e
		}, "event 1 does not follow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.tamper(chain("run_a", 6)))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Verify = %v, want ok", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Verify = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func TestHashCoversEveryField(t *testing.T) {
	base := chain("run_a", 2)[1]
	for name, edit := range map[string]func(*Event){
		"run":  func(e *Event) { e.RunID = "run_b" },
		"seq":  func(e *Event) { e.Seq++ },
		"at":   func(e *Event) { e.At = e.At.Add(time.Second) },
		"type": func(e *Event) { e.Type = Ended },
		"data": func(e *Event) { e.Data = json.RawMessage(`{}`) },
		"prev": func(e *Event) { e.PrevHash = "" },
		// Length prefixes keep a byte from moving between fields unnoticed.
		"boundary": func(e *Event) { e.RunID, e.Type = e.RunID+e.Type[:1], e.Type[1:] },
	} {
		e := base
		edit(&e)
		if HashOf(e) == HashOf(base) {
			t.Errorf("changing %s leaves the hash unchanged", name)
		}
	}
}
