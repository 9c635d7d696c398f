// Package modeltest is a fake model provider for tests across Corral: an
// httptest server that speaks the OpenAI Chat Completions API, whole and
// streamed, and answers what a Script says. Tests point the gateway at URL,
// script the model's turns (text, tool calls, usage, HTTP errors, a reply
// held open) and read back every request the provider received.
//
// A streamed reply comes the way real providers send it: a role chunk, the
// text in several pieces, each tool call's arguments split over at least two
// chunks (interleaved between calls, so they must be put back together by
// index), a finish chunk, then, when the request asked for it with
// stream_options.include_usage, a usage-only chunk, and "data: [DONE]".
package modeltest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Provider is a running fake provider. It serves POST {URL}/chat/completions,
// POST {URL}/embeddings (embeddings.go) and GET {URL}/models (models.go),
// and is safe for concurrent use.
type Provider struct {
	srv    *httptest.Server
	script Script

	scriptMu sync.Mutex // calls to the script, one at a time

	mu             sync.Mutex
	reqs           []Request
	failEmbeddings int      // the status embeddings requests get; 0 serves them
	models         []string // what GET /v1/models lists; nil answers 404 (models.go)

	closing   chan struct{} // closed by Close: releases held replies
	closeOnce sync.Once
}

// Request is one request the provider received, decoded.
type Request struct {
	Model         string
	Messages      []Message
	Tools         []string // the names of the function tools offered
	Stream        bool
	IncludeUsage  bool     // stream_options.include_usage
	Authorization string   // the header as sent, e.g. "Bearer sk-..."
	Embeddings    []string // the inputs of an embeddings request; nil for a chat request
	Body          []byte   // the raw JSON, for exact checks
}

// Message is one turn of a request's conversation. Content given as parts
// is joined into one string.
type Message struct {
	Role       string
	Content    string
	ToolCallID string     // tool turns
	ToolCalls  []ToolCall // assistant turns
}

// New starts a provider that answers every request with script's Reply. A
// nil script is Sequence(): every request fails with 500. Close it when done.
func New(script Script) *Provider {
	if script == nil {
		script = Sequence()
	}
	p := &Provider{script: script, closing: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// NewAt is New on a given address ("127.0.0.1:11435"), for a provider a
// person starts by hand (cmd fakemodel -addr).
func NewAt(addr string, script Script) (*Provider, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if script == nil {
		script = Sequence()
	}
	p := &Provider{script: script, closing: make(chan struct{})}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.Listener.Close()
	p.srv.Listener = l
	p.srv.Start()
	return p, nil
}

// URL is the base URL to configure a client with; it ends in /v1.
func (p *Provider) URL() string { return p.srv.URL + "/v1" }

// Close releases every held reply and stops the server.
func (p *Provider) Close() {
	p.closeOnce.Do(func() {
		close(p.closing)
		p.srv.Close()
	})
}

// Requests returns every chat completion and embeddings request received so
// far, in order.
func (p *Provider) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.reqs...)
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/embeddings" {
		p.serveEmbeddings(w, r)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		p.serveModels(w, r)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, "",
			fmt.Sprintf("modeltest serves only POST /v1/chat/completions and /v1/embeddings, not %s %s", r.Method, r.URL.Path))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "", "modeltest: reading the request: "+err.Error())
		return
	}
	req, err := decodeRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "", "modeltest: the request is not a chat completion: "+err.Error())
		return
	}
	req.Authorization = r.Header.Get("Authorization")

	p.scriptMu.Lock()
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	n := len(p.reqs)
	p.mu.Unlock()
	rep := p.script(req)
	p.scriptMu.Unlock()

	a := answer{
		Reply: rep,
		id:    fmt.Sprintf("chatcmpl-modeltest-%d", n),
		model: req.Model,
	}
	if rep.Model != "" {
		a.model = rep.Model
	}
	// Calls without an id get one, unique within the provider.
	a.calls = append([]ToolCall(nil), rep.ToolCalls...)
	for i := range a.calls {
		if a.calls[i].ID == "" {
			a.calls[i].ID = fmt.Sprintf("call_%d_%d", n, i)
		}
	}
	hold := func() bool {
		if rep.Block == nil {
			return true
		}
		select {
		case <-rep.Block:
			return true
		case <-r.Context().Done():
		case <-p.closing:
		}
		return false
	}

	for k, vs := range rep.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	switch {
	case rep.Status != 0:
		if hold() {
			writeError(w, rep.Status, rep.Body, http.StatusText(rep.Status))
		}
	case req.Stream:
		a.stream(w, req.IncludeUsage, hold)
	default:
		if !hold() {
			return
		}
		if rep.StreamError != "" {
			writeError(w, http.StatusInternalServerError, "", rep.StreamError)
			return
		}
		a.whole(w)
	}
}

// writeError answers status with body, or with an OpenAI-style error
// carrying message when body is "".
func writeError(w http.ResponseWriter, status int, body, message string) {
	if body == "" {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": message, "type": "modeltest_error", "code": nil,
		}})
		body = string(b)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// answer is a Reply being sent.
type answer struct {
	Reply
	id, model string
	calls     []ToolCall // with ids filled in
}

func (a answer) finishReason() string {
	if len(a.calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (a answer) usage() map[string]any {
	u := Usage{Input: DefaultInputTokens, Output: DefaultOutputTokens}
	if a.Usage != nil {
		u = *a.Usage
	}
	return map[string]any{"prompt_tokens": u.Input, "completion_tokens": u.Output, "total_tokens": u.Input + u.Output}
}

func (a answer) whole(w http.ResponseWriter) {
	msg := map[string]any{"role": "assistant", "content": a.Content}
	if len(a.calls) > 0 {
		if a.Content == "" {
			msg["content"] = nil
		}
		var calls []map[string]any
		for _, c := range a.calls {
			calls = append(calls, map[string]any{
				"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments},
			})
		}
		msg["tool_calls"] = calls
	}
	cc := map[string]any{
		"id": a.id, "object": "chat.completion", "created": time.Now().Unix(), "model": a.model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": a.finishReason(), "message": msg}},
	}
	if !a.NoUsage {
		cc["usage"] = a.usage()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(cc)
}

// stream sends the reply as Server-Sent Events. hold is waited on once the
// client has the role chunk and the first piece of text, so that a held
// reply is one caught in the middle; when it says no, the stream just stops.
func (a answer) stream(w http.ResponseWriter, includeUsage bool, hold func() bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	created := time.Now().Unix()
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		c := map[string]any{
			"id": a.id, "object": "chat.completion.chunk", "created": created, "model": a.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
		if includeUsage {
			c["usage"] = nil
		}
		return c
	}

	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	text := split(a.Content, contentPieces)
	if len(text) > 0 {
		send(chunk(map[string]any{"content": text[0]}, nil))
		text = text[1:]
	}
	if !hold() {
		return
	}
	for _, t := range text {
		send(chunk(map[string]any{"content": t}, nil))
	}

	// Round k sends the k-th piece of every call's arguments; the first
	// round also names the call.
	args := make([][]string, len(a.calls))
	rounds := 1
	for i, c := range a.calls {
		args[i] = split(c.Arguments, argumentPieces)
		rounds = max(rounds, len(args[i]))
	}
	for k := range rounds {
		for i, c := range a.calls {
			if k > 0 && k >= len(args[i]) {
				continue
			}
			piece := ""
			if k < len(args[i]) {
				piece = args[i][k]
			}
			call := map[string]any{"index": i, "function": map[string]any{"arguments": piece}}
			if k == 0 {
				call["id"] = c.ID
				call["type"] = "function"
				call["function"].(map[string]any)["name"] = c.Name
			}
			send(chunk(map[string]any{"tool_calls": []any{call}}, nil))
		}
	}

	if a.StreamError != "" {
		send(map[string]any{"error": map[string]any{"message": a.StreamError, "type": "server_error", "code": nil}})
		return
	}
	send(chunk(map[string]any{}, a.finishReason()))
	if includeUsage && !a.NoUsage {
		send(map[string]any{
			"id": a.id, "object": "chat.completion.chunk", "created": created, "model": a.model,
			"choices": []any{}, "usage": a.usage(),
		})
	}
	io.WriteString(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

const (
	contentPieces  = 4 // a streamed reply's text comes in up to this many chunks
	argumentPieces = 3 // a streamed tool call's arguments, in up to this many
)

// split cuts s into at most n pieces of about the same number of runes,
// never inside a rune.
func split(s string, n int) []string {
	runes := []rune(s)
	if len(runes) == 0 {
		return nil
	}
	n = min(n, len(runes))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(runes[i*len(runes)/n:(i+1)*len(runes)/n]))
	}
	return out
}

type wireRequest struct {
	Model    string        `json:"model"`
	Messages []wireMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func decodeRequest(body []byte) (Request, error) {
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		return Request{}, err
	}
	req := Request{
		Model:        wr.Model,
		Stream:       wr.Stream,
		IncludeUsage: wr.StreamOptions.IncludeUsage,
		Body:         body,
	}
	for _, t := range wr.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	for i, wm := range wr.Messages {
		content, err := decodeContent(wm.Content)
		if err != nil {
			return Request{}, fmt.Errorf("message %d: %w", i, err)
		}
		m := Message{Role: wm.Role, Content: content, ToolCallID: wm.ToolCallID}
		for _, tc := range wm.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, m)
	}
	return req, nil
}

// decodeContent reads a message's content: absent, null, a string, or an
// array of parts whose text is joined.
func decodeContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor parts")
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}
