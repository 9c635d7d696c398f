package protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The protocol corpus. testdata/requests holds client requests, most of
// them recorded from the real CLIs (codex-*, claude-*, opencode-*: their
// long prompts shortened, their ids replaced), each with the Chat
// Completions request it must become (.golden). testdata/upstream holds
// provider answers as HTTP responses; each is relayed to every kind of
// client (testdata/relay) and checked line by line, event by event,
// against testdata/golden.
//
// go test ./internal/protocol -run Corpus -update rewrites the golden
// files; read every changed one before keeping it.

var update = flag.Bool("update", false, "rewrite the golden files of the corpus")

// fixed makes a Call's made-up parts (its id, its time) the same at every
// run, for the golden files.
func fixed(c Call) Call {
	c.ID = map[Protocol]string{Chat: "chatcmpl-test", Responses: "resp_test", Messages: "msg_test"}[c.Protocol]
	c.Created = 1700000000
	return c
}

func parserFor(name string) func([]byte) (Call, error) {
	switch {
	case strings.HasPrefix(name, "codex-"), strings.HasPrefix(name, "responses"):
		return ParseResponses
	case strings.HasPrefix(name, "claude-"), strings.HasPrefix(name, "messages"):
		return ParseMessages
	}
	return ParseChat
}

func TestParseCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/requests/*.json")
	if len(files) < 8 {
		t.Fatalf("found %d request fixtures, want the corpus", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := parserFor(name)(body)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !json.Valid(c.Chat) {
				t.Fatalf("Chat is not JSON: %s", c.Chat)
			}
			got, err := json.MarshalIndent(struct {
				Protocol string          `json:"protocol"`
				Model    string          `json:"model"`
				Stream   bool            `json:"stream"`
				Dropped  []string        `json:"dropped"`
				Chat     json.RawMessage `json:"chat"`
			}{c.Protocol.String(), c.Model, c.Stream, c.Dropped, c.Chat}, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, strings.TrimSuffix(f, ".json")+".golden", append(got, '\n'))
		})
	}
}

// clients are the kinds of client each upstream answer is relayed to.
var clients = []struct {
	name    string
	fixture string
	parse   func([]byte) (Call, error)
}{
	{"chat", "chat.json", ParseChat},
	{"chat-usage", "chat-usage.json", ParseChat},
	{"responses", "responses.json", ParseResponses},
	{"messages", "messages.json", ParseMessages},
}

// clientCall parses a client fixture, streamed or not.
func clientCall(t *testing.T, fixture string, parse func([]byte) (Call, error), stream bool) Call {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/relay", fixture))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["stream"] = stream
	b, _ = json.Marshal(m)
	c, err := parse(b)
	if err != nil {
		t.Fatalf("parse %s: %v", fixture, err)
	}
	return fixed(c)
}

func readUpstream(t *testing.T, path string) *http.Response {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp
}

func TestRelayCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/upstream/*.http")
	if len(files) < 10 {
		t.Fatalf("found %d upstream fixtures, want the corpus", len(files))
	}
	for _, f := range files {
		up := strings.TrimSuffix(filepath.Base(f), ".http")
		streams := []bool{true}
		if up == "whole" || up == "text" {
			// A call that does not stream, and the provider answering
			// whole, or streaming all the same.
			streams = []bool{true, false}
		}
		for _, cl := range clients {
			for _, stream := range streams {
				name := up + "." + cl.name
				if !stream {
					name += "-whole"
				}
				t.Run(name, func(t *testing.T) {
					call := clientCall(t, cl.fixture, cl.parse, stream)
					w := httptest.NewRecorder()
					res := Relay(context.Background(), w, readUpstream(t, f), call)
					checkGolden(t, filepath.Join("testdata/golden", name+".txt"), transcript(w, res))
				})
			}
		}
	}
}

// transcript is what a client got, and the Result, as text: the status,
// the headers that matter, the body, event by event as written.
func transcript(w *httptest.ResponseRecorder, res Result) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "status: %d\n", w.Code)
	var keys []string
	for k := range w.Header() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(w.Header()[k], ", "))
	}
	b.WriteString("\n")
	b.Write(w.Body.Bytes())
	if w.Body.Len() > 0 && !bytes.HasSuffix(w.Body.Bytes(), []byte("\n")) {
		b.WriteString("\n")
	}
	errText := "<nil>"
	if res.Err != nil {
		errText = res.Err.Error()
	}
	fmt.Fprintf(&b, "--- result\nusage: input=%d output=%d estimated=%v\nmodel: %s\nstatus: %d\nclient gone: %v\nerr: %s\n",
		res.Usage.Input, res.Usage.Output, res.Usage.Estimated, res.Model, res.Status, res.ClientGone, errText)
	return b.Bytes()
}

// checkGolden compares got with the golden file line by line and names the
// first line that differs; -update rewrites the file.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it, then read it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s: line %d differs\n got: %s\nwant: %s", path, i+1, gl, wl)
		}
	}
}
