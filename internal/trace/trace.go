// Package trace is the append-only, hash-chained record of a run (and of
// what happens to an agent's repository outside runs, on a chain named by
// the agent's id). Each
// event's hash covers its content and the previous event's hash, so a
// changed, removed, inserted or reordered event breaks the chain at that
// point, and anyone holding the events can check it with Verify.
package trace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"corral"
)

// Event types a run records.
const (
	Admitted    = "admitted"
	Started     = "started"
	Message     = "message"
	ToolCall    = "tool_call"
	ToolResult  = "tool_result"
	Usage       = "usage"
	Retry       = "retry" // a model call the provider refused for now is tried again
	Violation   = "violation"
	Paused      = "paused"
	Resumed     = "resumed"
	Quarantined = "quarantined"
	Ended       = "ended"
	Reconciled  = "reconciled"
	Reattached  = "reattached" // the server came back and found the run's session still running
	// Delegation: the run started a child run on another agent (or found
	// the one its call had started), a hop it asked for was refused (the
	// cap, or not found), or it created an agent.
	Delegated         = "delegated"
	DelegationRefused = "delegation_refused"
	AgentCreated      = "agent_created"
	// Retrieved: what a search of the agent's documents found, for the
	// message that started the run or a search_documents call: document
	// and chunk ids, scores and the confidence, never the passages' text.
	Retrieved = "retrieved"
	// GatewayNote: what of an agent CLI's model call could not be sent
	// upstream (a tool type the provider has no equivalent for) and was
	// left out, never silently.
	GatewayNote = "gateway_note"
	// Transcript is one step an agent CLI reported of its work (a model
	// turn, a tool call, a result), bounded in size.
	Transcript = "transcript"

	// EgressDenied: the egress proxy refused a request of the run: host,
	// port, method, path and the rule's words. Egress: what the run
	// exchanged with one host, once its connections to it have closed.
	EgressDenied = "egress_denied"
	Egress       = "egress"

	TerminalOpened = "terminal_opened" // a person opened the run's terminal
	TerminalClosed = "terminal_closed" // and closed it: who, and the bytes each way
)

// Event types of an agent's own chain (its id in place of a run's): what
// happened to its repository outside any run.
const (
	Cloned      = "cloned"
	CloneFailed = "clone_failed"
	Pushed      = "pushed"
	PushRefused = "push_refused"
	Synced      = "synced"       // the workspace brought to its remote branch
	SyncRefused = "sync_refused" // and why not: nothing changed
)

// Event is one entry of a run's trace.
type Event = corral.TraceEvent

// HashOf computes an event's hash over a length-prefixed encoding of every
// field but Hash, so no two different events encode alike.
func HashOf(e Event) string {
	h := sha256.New()
	field := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	field("corral-trace-v1")
	field(e.RunID)
	field(strconv.FormatInt(e.Seq, 10))
	field(e.At.UTC().Format(time.RFC3339Nano))
	field(e.Type)
	field(string(e.Data))
	field(e.PrevHash)
	return hex.EncodeToString(h.Sum(nil))
}

// Verify checks one run's events, in the order given: sequence numbers
// from 1 without gaps, each linked to the one before, each hash right. It
// names the first broken event.
func Verify(events []Event) error {
	prev := ""
	for i, e := range events {
		switch {
		case e.Seq != int64(i+1):
			return fmt.Errorf("run %s: event %d has sequence number %d: an event is missing or out of order", e.RunID, i+1, e.Seq)
		case e.PrevHash != prev:
			return fmt.Errorf("run %s: event %d does not follow event %d: the chain is broken", e.RunID, e.Seq, e.Seq-1)
		case HashOf(e) != e.Hash:
			return fmt.Errorf("run %s: event %d does not match its hash: it was changed", e.RunID, e.Seq)
		}
		prev = e.Hash
	}
	return nil
}

// Store keeps trace events. Implementations refuse updates and deletes,
// and refuse an event whose sequence or previous hash does not continue
// its run's chain (ECONFLICT).
type Store interface {
	AppendTrace(ctx context.Context, e Event) error
	// LastTrace returns the sequence number and hash of a run's last
	// event: 0 and "" for a run with none.
	LastTrace(ctx context.Context, runID string) (int64, string, error)
	Trace(ctx context.Context, runID string) ([]Event, error)
	TraceRuns(ctx context.Context) ([]string, error)
}

// Recorder appends events to runs' chains. It is safe for concurrent use;
// events of one run are appended one at a time.
type Recorder struct {
	store Store
	now   func() time.Time

	mu   sync.Mutex
	runs map[string]*sync.Mutex
}

// NewRecorder returns a Recorder over store; now is the clock (nil for
// time.Now).
func NewRecorder(store Store, now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	return &Recorder{store: store, now: now, runs: map[string]*sync.Mutex{}}
}

// Append records an event of type typ with data (marshalled to JSON) at
// the end of the run's chain. The data must hold no secret: a trace is
// shown to everyone who may view the run.
func (r *Recorder) Append(ctx context.Context, runID, typ string, data any) (Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, corral.Internal("trace: encode "+typ, err)
	}
	r.mu.Lock()
	m := r.runs[runID]
	if m == nil {
		m = &sync.Mutex{}
		r.runs[runID] = m
	}
	r.mu.Unlock()
	m.Lock()
	defer m.Unlock()
	seq, prev, err := r.store.LastTrace(ctx, runID)
	if err != nil {
		return Event{}, err
	}
	e := Event{RunID: runID, Seq: seq + 1, At: r.now().UTC(), Type: typ, Data: raw, PrevHash: prev}
	e.Hash = HashOf(e)
	if err := r.store.AppendTrace(ctx, e); err != nil {
		return Event{}, err
	}
	return e, nil
}

// Forget drops the per-run lock of a run that has ended.
func (r *Recorder) Forget(runID string) {
	r.mu.Lock()
	delete(r.runs, runID)
	r.mu.Unlock()
}

// VerifyAll checks every run's chain in store. It returns the number of
// events and runs checked, and the first broken event.
func VerifyAll(ctx context.Context, store Store) (events, runs int, err error) {
	ids, err := store.TraceRuns(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, id := range ids {
		evs, err := store.Trace(ctx, id)
		if err != nil {
			return events, runs, err
		}
		if err := Verify(evs); err != nil {
			return events, runs, err
		}
		events += len(evs)
		runs++
	}
	return events, runs, nil
}

// Runs lists runs by status: what VerifyStore needs to find cut-off ends.
type Runs interface {
	RunsIn(ctx context.Context, statuses ...corral.RunStatus) ([]corral.Run, error)
}

// VerifyStore checks every chain in store (VerifyAll), then what a chain
// alone cannot show: that no trace lost its newest events. Every run the
// store has as ended must have a trace whose last event is its Ended
// event, or its Ended event and then only TerminalClosed (a terminal that
// closed as its run ended). It returns the events and chains checked, and the first break.
func VerifyStore(ctx context.Context, store Store, runs Runs) (events, chains int, err error) {
	events, chains, err = VerifyAll(ctx, store)
	if err != nil {
		return events, chains, err
	}
	ended, err := runs.RunsIn(ctx, corral.RunCompleted, corral.RunCancelled, corral.RunKilled, corral.RunErrored, corral.RunReconciled)
	if err != nil {
		return events, chains, err
	}
	for _, r := range ended {
		evs, err := store.Trace(ctx, r.ID)
		if err != nil {
			return events, chains, err
		}
		// A terminal open when its run ended closes just after, and says
		// so after the Ended event: that alone may follow it.
		last := len(evs) - 1
		for last >= 0 && evs[last].Type == TerminalClosed {
			last--
		}
		if last < 0 || evs[last].Type != Ended {
			return events, chains, fmt.Errorf("run %s: the run is %s, but its trace (%d events) does not end with its ended event: events were cut off or never written", r.ID, r.Status, len(evs))
		}
	}
	return events, chains, nil
}
