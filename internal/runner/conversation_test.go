package runner

import (
	"reflect"
	"testing"

	"corral"
)

// Shorthands for the turns of a conversation.
func user(s string) corral.ModelMessage { return corral.ModelMessage{Role: "user", Content: s} }
func says(s string) corral.ModelMessage { return corral.ModelMessage{Role: "assistant", Content: s} }
func result(id, s string) corral.ModelMessage {
	return corral.ModelMessage{Role: "tool", ToolCallID: id, Content: s}
}
func broke(id string) corral.ModelMessage { return result(id, interrupted) }

// asks is an assistant turn that calls the shell once per id.
func asks(ids ...string) corral.ModelMessage {
	m := corral.ModelMessage{Role: "assistant"}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, corral.ToolCall{ID: id, Name: "shell", Arguments: `{"command":"ls"}`})
	}
	return m
}

func TestRepair(t *testing.T) {
	tests := []struct {
		name string
		in   conversation
		want conversation
	}{
		{"empty", nil, conversation{}},
		{
			"already valid",
			conversation{user("go"), asks("a", "b"), result("a", "1"), result("b", "2"), says("done"), user("again"), says("ok")},
			conversation{user("go"), asks("a", "b"), result("a", "1"), result("b", "2"), says("done"), user("again"), says("ok")},
		},
		{
			"results in another order than the calls",
			conversation{user("go"), asks("a", "b"), result("b", "2"), result("a", "1"), says("done")},
			conversation{user("go"), asks("a", "b"), result("b", "2"), result("a", "1"), says("done")},
		},
		{
			"dangling calls at the end",
			conversation{user("go"), asks("a", "b", "c"), result("a", "1")},
			conversation{user("go"), asks("a", "b", "c"), result("a", "1"), broke("b"), broke("c")},
		},
		{
			"dangling call followed by the next user turn",
			conversation{user("go"), asks("a"), user("next")},
			conversation{user("go"), asks("a"), broke("a"), user("next")},
		},
		{
			"orphan result dropped",
			conversation{user("go"), result("x", "stray"), says("hi")},
			conversation{user("go"), says("hi")},
		},
		{
			"orphan result at the very start dropped",
			conversation{result("x", "stray"), user("go"), says("hi")},
			conversation{user("go"), says("hi")},
		},
		{
			"second result for the same call dropped",
			conversation{user("go"), asks("a"), result("a", "1"), result("a", "again"), says("done")},
			conversation{user("go"), asks("a"), result("a", "1"), says("done")},
		},
		{
			"result for an earlier assistant turn",
			// a's call was cut off by the next assistant turn; its late
			// result no longer follows its call and is dropped.
			conversation{user("go"), asks("a"), asks("b"), result("a", "late"), result("b", "2"), says("done")},
			conversation{user("go"), asks("a"), broke("a"), asks("b"), result("b", "2"), says("done")},
		},
		{
			"result after a user turn closed its call",
			conversation{user("go"), asks("a"), user("next"), result("a", "late"), says("ok")},
			conversation{user("go"), asks("a"), broke("a"), user("next"), says("ok")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append(conversation(nil), tt.in...)
			got := tt.in.repair()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("repair(%v)\n = %v\nwant %v", tt.in, got, tt.want)
			}
			if !reflect.DeepEqual(tt.in, in) {
				t.Errorf("repair changed its input to %v", tt.in)
			}
			// Repairing twice changes nothing more.
			if again := got.repair(); !reflect.DeepEqual(again, got) {
				t.Errorf("repair(repair(%v)) = %v, want %v", tt.in, again, got)
			}
		})
	}
}

func TestTrim(t *testing.T) {
	// Sizes count content, tool names and arguments:
	// first 8 bytes, second 2+(5+16)+2+2 = 27, third 4; 39 in all.
	first := conversation{user("aaaa"), says("bbbb")}
	second := conversation{user("cc"), asks("x"), result("x", "dd"), says("ee")}
	third := conversation{user("ff"), says("gg")}
	cat := func(cs ...conversation) conversation {
		var out conversation
		for _, c := range cs {
			out = append(out, c...)
		}
		return out
	}
	all := cat(first, second, third)
	if n := all.size(); n != 39 {
		t.Fatalf("test conversation size = %d, want 39", n)
	}

	tests := []struct {
		name string
		in   conversation
		max  int
		want conversation
	}{
		{"fits exactly", all, 39, all},
		{"fits with room", all, 1 << 20, all},
		{"one byte over drops the oldest exchange", all, 38, cat(second, third)},
		{"drops only what it must", all, 31, cat(second, third)},
		{"never cuts inside an exchange", all, 30, third},
		{"keeps the newest exchange even when over", all, 0, third},
		{"a lone exchange over the limit stays", second, 1, second},
		{"leading turns without a user turn go first", cat(conversation{says("left over")}, third), 4, third},
		{"nothing to trim", nil, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.trim(tt.max)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("trim(%d) of %v\n = %v\nwant %v", tt.max, tt.in, got, tt.want)
			}
			if len(got) > 0 && len(got) < len(tt.in) && got[0].Role != "user" {
				t.Errorf("trim(%d) cut before a %s turn, want only before a user turn", tt.max, got[0].Role)
			}
		})
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		conv conversation
	}{
		{"one turn", conversation{user("hello")}},
		{"tool calls and results", conversation{
			user("make it"),
			{Role: "assistant", Content: "on it", ToolCalls: []corral.ToolCall{
				{ID: "c1", Name: "write_file", Arguments: `{"path":"a.txt","content":"x\ny"}`},
				{ID: "c2", Name: "shell", Arguments: `{"command":"ls > out"}`},
			}},
			result("c1", "ok"),
			result("c2", `{"exit_code":0,"output":"","violation":""}`),
			says("done ✓"),
		}},
		{"text that needs escaping", conversation{user("quotes \" and \\ and \x01 and <html> and 日本")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.conv.encode()
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			got, err := decodeConversation(b)
			if err != nil {
				t.Fatalf("decodeConversation(%s): %v", b, err)
			}
			if !reflect.DeepEqual(got, tt.conv) {
				t.Errorf("decode(encode(%v)) = %v", tt.conv, got)
			}
		})
	}
}

func TestDecodeConversation(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    conversation
		wantErr bool
	}{
		{"nothing stored", "", nil, false},
		{"empty", `{"version":1,"turns":[]}`, conversation{}, false},
		{"current version", `{"version":1,"turns":[{"role":"user","content":"hi"}]}`, conversation{user("hi")}, false},
		{"newer version", `{"version":2,"turns":[{"role":"user","content":"hi"}]}`, nil, true},
		{"no version", `{"turns":[{"role":"user","content":"hi"}]}`, nil, true},
		{"not JSON", `{"version":1,`, nil, true},
		{"not an object", `[1,2]`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeConversation([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodeConversation(%s) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decodeConversation(%s) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}
