package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"corral"
	"corral/internal/service"
)

type runView struct {
	ID          string       `json:"id"`
	AgentID     string       `json:"agent_id"`
	Status      string       `json:"status"`
	TriggeredBy *userRefView `json:"triggered_by"`
	ParentRunID *string      `json:"parent_run_id"`
	RootRunID   string       `json:"root_run_id"`
	Depth       int          `json:"depth"`
	MessageID   string       `json:"message_id"`
	Driver      string       `json:"driver"`
	ChangeSetID *string      `json:"change_set_id"`
	Tokens      tokensView   `json:"tokens"`
	Violation   *string      `json:"violation"`
	Reason      string       `json:"reason"`
	CreatedAt   string       `json:"created_at"`
	StartedAt   *string      `json:"started_at"`
	EndedAt     *string      `json:"ended_at"`
	// Node is the sandbox node the run's session ran on (role control).
	Node *string `json:"node,omitempty"`
}

type tokensView struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

func viewRun(r corral.Run) runView {
	v := runView{
		ID: r.ID, AgentID: r.AgentID, Status: string(r.Status), MessageID: r.MessageID, Driver: "builtin",
		ParentRunID: optional(r.ParentRunID), RootRunID: r.Root(), Depth: r.Depth, ChangeSetID: optional(r.ChangeSetID),
		Tokens:    tokensView{Input: r.Tokens.Input, Output: r.Tokens.Output},
		Violation: optional(string(r.Violation)), Reason: r.Reason, CreatedAt: rfc3339(r.CreatedAt),
	}
	if r.Driver != "" {
		v.Driver = r.Driver
	}
	v.Node = optional(r.Node)
	if r.TriggeredBy != nil {
		v.TriggeredBy = &userRefView{ID: r.TriggeredBy.ID, Name: r.TriggeredBy.Name}
	}
	if !r.StartedAt.IsZero() {
		s := rfc3339(r.StartedAt)
		v.StartedAt = &s
	}
	if !r.EndedAt.IsZero() {
		s := rfc3339(r.EndedAt)
		v.EndedAt = &s
	}
	return v
}

// optional is nil for "", so an absent value answers null.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

type traceView struct {
	Seq      int64           `json:"seq"`
	At       string          `json:"at"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
	Hash     string          `json:"hash"`
	PrevHash string          `json:"prev_hash"`
}

// viewTrace shows an event exactly as hashed (At to the nanosecond), so a
// client can check the chain with trace.HashOf.
func viewTrace(e service.TraceEvent) traceView {
	return traceView{Seq: e.Seq, At: e.At.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"),
		Type: e.Type, Data: e.Data, Hash: e.Hash, PrevHash: e.PrevHash}
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	runs, err := s.runs.List(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(runs, viewRun))
	return nil
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	run, err := s.runs.Get(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewRun(run))
	return nil
}

func (s *Server) getTree(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	runs, err := s.runs.Tree(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(runs, viewRun))
	return nil
}

func (s *Server) getTrace(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	events, err := s.runs.Trace(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAll(events, viewTrace))
	return nil
}

type terminalAnswer struct {
	Run runView `json:"run"`
}

// startTerminal is POST /api/agents/{id}/terminal: a terminal run.
func (s *Server) startTerminal(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	run, err := s.runs.StartTerminal(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, terminalAnswer{viewRun(run)})
	return nil
}

func (s *Server) stopRun(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	run, err := s.runs.Stop(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, viewRun(run))
	return nil
}

func (s *Server) killRun(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	run, err := s.runs.Kill(r.Context(), actor, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, viewRun(run))
	return nil
}

// runEvents streams a run's trace as server-sent events: "trace" events
// carry a stored event (its seq is the SSE id), "delta" events a piece of
// the model's text as it streams, "output" events a piece of a running
// tool's output. The stream ends with the run. A watcher
// who loses access gets a last "error" event and is cut off.
//
// A stream holds a connection and a watcher for as long as its run lasts, so
// a session may hold only Config.MaxStreamsPerSession of them and the server
// Config.MaxStreams in all, and a client that stops reading is dropped once a
// write has waited Config.StreamWriteTimeout, rather than holding its slot, a
// goroutine and the buffered events forever.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request, actor corral.User) error {
	// Errors before the first byte are answered as usual.
	if _, err := s.runs.Get(r.Context(), actor, r.PathValue("id")); err != nil {
		return err
	}
	release, err := s.streams.acquire(credentialKey(r))
	if err != nil {
		return err
	}
	defer release() // however the stream ends: run over, client gone, shutdown, write timeout, panic
	rc := http.NewResponseController(w)
	// Every write gets a fresh deadline first. The last one is still set
	// when the handler returns, so the connection is not kept for another
	// request, whose answer it would cut short.
	deadline := func() { rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout)) }
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "close")
	deadline()
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if s.cfg.Done != nil {
		go func() {
			select {
			case <-s.cfg.Done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	writeFailed := false // the client is gone or stopped reading: nothing more to tell it
	// A client whose stream broke asks again with the last id it got
	// (EventSource does so itself): it gets the events after it.
	from := parseEventID(r.Header.Get("Last-Event-ID"))
	seq := from.Seq // the last trace event this client has
	err = s.runs.Watch(ctx, actor, r.PathValue("id"), from, func(e service.RunEvent) error {
		var err error
		deadline()
		switch {
		case e.Trace != nil:
			seq = e.Trace.Seq
			b, _ := json.Marshal(viewTrace(*e.Trace))
			_, err = fmt.Fprintf(w, "id: %d\nevent: trace\ndata: %s\n\n", e.Trace.Seq, b)
		case e.Output != nil:
			b, _ := json.Marshal(map[string]string{"tool_call_id": e.Output.ToolCallID, "content": e.Output.Text})
			_, err = fmt.Fprintf(w, "id: %d.%d\nevent: output\ndata: %s\n\n", seq, e.Output.Offset+len(e.Output.Text), b)
		default:
			b, _ := json.Marshal(map[string]string{"content": e.Delta})
			_, err = fmt.Fprintf(w, "event: delta\ndata: %s\n\n", b)
		}
		if err == nil {
			err = rc.Flush()
		}
		writeFailed = err != nil
		return err
	})
	if err != nil && ctx.Err() == nil && !writeFailed {
		code := corral.ErrorCode(err)
		if code == corral.EINTERNAL {
			s.logError(r, err)
		}
		b, _ := json.Marshal(errorBody{errorView{Code: code, Message: corral.ErrorMessage(err)}})
		deadline()
		fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
		rc.Flush()
	}
	return nil
}

// parseEventID reads an id this stream gave: a trace event's seq ("12"),
// or an output event's "12.345", the last trace event's seq and how many
// bytes of the running command's output came with it. Anything else is
// the start: the client gets every event again.
func parseEventID(id string) service.WatchFrom {
	seq, off, _ := strings.Cut(id, ".")
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n < 0 {
		return service.WatchFrom{}
	}
	if off == "" {
		return service.WatchFrom{Seq: n}
	}
	o, err := strconv.Atoi(off)
	if err != nil || o < 0 {
		return service.WatchFrom{}
	}
	return service.WatchFrom{Seq: n, Output: o}
}
