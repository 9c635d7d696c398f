package corral

import (
	"context"
	"strconv"
	"time"
)

// The words of a model call, shared by the gateway that makes it, the
// runner whose agent loop asks for it, the services that meter embeddings
// and the model API that agent CLIs call from their sandboxes. Those
// whose plain name means something else here carry "Model": a Message is
// an entry of an agent's thread, a Tool is an agent CLI.

// ModelMessage is one turn of a model conversation.
type ModelMessage struct {
	Role       string // system, user, assistant or tool
	Content    string
	ToolCalls  []ToolCall // assistant turns only
	ToolCallID string     // tool turns only: the call this result answers
}

// ToolCall is a function call the model asked for.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON, as the model wrote it: validate before use
}

// ModelTool is a function the model may call.
type ModelTool struct {
	Name        string
	Description string
	Parameters  map[string]any // JSON schema of the arguments
}

// ModelRequest is one model call.
type ModelRequest struct {
	Model    string // "" means the gateway's default model
	Messages []ModelMessage
	Tools    []ModelTool

	// OnDelta, when set, makes the call stream. It is called with each piece
	// of the assistant's text as it arrives, in order, on the goroutine that
	// made the call and before the call returns; the pieces add up to the
	// ModelResponse's content. Tool calls come only whole, in the
	// ModelResponse. A call can still fail after some pieces were handed
	// over (no usage at the end, a broken stream): the pieces were
	// provisional, the error is the answer.
	OnDelta func(ModelDelta)

	// OnRetry, when set, is told of each failed try before the gateway
	// waits to make it again, on the goroutine that made the call.
	OnRetry func(ModelRetry)

	// Interrupt, when closed, asks for no more tries: a wait to try again
	// ends at once and the call fails. A try in flight is not cut (that is
	// what cancelling ctx is for). A run's graceful stop closes it.
	Interrupt <-chan struct{}
}

// ModelDelta is a piece of the assistant's reply as a streamed call
// receives it.
type ModelDelta struct {
	Content string
}

// ModelRetry describes a failed try that the gateway is about to make
// again, for ModelRequest.OnRetry.
type ModelRetry struct {
	Attempt int           // the try about to be made: 2 for the first retry
	Status  int           // the HTTP status the failed try got; 0 when no answer came
	Wait    time.Duration // how long the gateway waits before it
	Message string        // the provider's own error message, without the key; may be ""
}

// ModelResponse is the model's answer to one ModelRequest.
type ModelResponse struct {
	Message ModelMessage // the assistant's reply: content and/or tool calls
	Usage   Tokens       // exactly as the provider reported them
	Model   string       // the model the provider says answered
}

// Meter is the budget side of model calls.
type Meter interface {
	// Reserve holds a call to model (the name the gateway sends it under)
	// of at most ceiling tokens (the most it can spend: see Ceiling)
	// against the budget before the call is sent, and returns what settles
	// the call. Its error (EADMISSION when the budget cannot hold it)
	// reaches the caller unchanged.
	Reserve(ctx context.Context, model string, ceiling int64) (Settle, error)
}

// Settle ends a call's reservation, once, whatever way the call ended:
// with the usage the provider reported (reported), or with none (an answer
// came without usage: the call is metered at its ceiling, see Charge). A
// call that got no answer settles with no usage, reported. Its error
// reaches the caller unchanged, together with the call's answer.
type Settle func(ctx context.Context, u Tokens, reported bool) error

// Ceiling is the most a call can spend: requestBytes of request (a
// tokenizer makes at most one token of each byte, and the body holds at
// least a byte of syntax for each of the few tokens a message adds) and
// its output cap.
func Ceiling(requestBytes int, maxOutput int64) int64 { return int64(requestBytes) + maxOutput }

// CLIGrant is what one model call of an agent CLI may do, as the model
// API serves it: it belongs to one running run, and through it to one
// agent. The runner makes one afresh for every call.
type CLIGrant interface {
	Run() string   // the run it belongs to
	Model() string // the model it is made with
	// Reserve holds the call's ceiling (Ceiling) on the agent's budget
	// and under its tree's token cap, and refuses (EADMISSION) a call they
	// cannot hold. Record settles it.
	Reserve(ctx context.Context, ceiling int64) error
	// Record settles, meters and traces the call: the usage as the
	// provider reported it (or as the protocol estimated it), taken only
	// when it is a possible one (Charge).
	Record(ctx context.Context, u Tokens, reported bool, c CLICall) error
	// Tools are the tools the run's MCP server offers (search_documents
	// and the delegation tools, each when the server offers it).
	Tools() []ModelTool
	// CallTool runs one of them with its arguments (JSON) and returns the
	// result for the model, and whether it is an error. It may take as
	// long as a delegated run; when ctx ends, what it started is stopped.
	CallTool(ctx context.Context, name, arguments string) (string, bool)
}

// CLICall is what the model API knows of one agent CLI's model call when
// it ends, for the run's trace.
type CLICall struct {
	Protocol  string   // chat | responses | messages
	Model     string   // the model the provider says answered
	Status    int      // the provider's HTTP status
	Estimated bool     // the provider reported no usage: the tokens are an estimate
	Aborted   bool     // the CLI went away before the answer ended
	Dropped   []string // what of the CLI's request could not be sent upstream
	Error     string   // what went wrong, for the trace (never a secret)
	// Native: the call was passed through in its own protocol, not
	// translated to Chat Completions. Finish is why the answer ended, as
	// the provider said ("" when it did not, or the call was passed through).
	Native bool
	Finish string
}

// ModelObserver is told what the gateway's model calls were, for the
// server's metrics: what kind of call, with which model, how long it took
// and what the provider reported it used; never who made it, for which
// run, or what it said. It must be cheap and safe for concurrent use.
type ModelObserver interface {
	// ModelCall is told of each call once it has ended, whatever way.
	ModelCall(ModelCallStats)
	// BudgetRefused is told of each call the budget refused before it was
	// sent (its reservation's EADMISSION).
	BudgetRefused()
}

// ModelCallStats is what a ModelObserver learns of one model call.
type ModelCallStats struct {
	Operation string // ModelChat or ModelEmbeddings: OpenTelemetry's gen_ai.operation.name
	Model     string // the model the call was made with
	// Usage is the provider's own figures, when Reported; a call it
	// reported none for (or whose tokens were estimated) tells none.
	Usage    Tokens
	Reported bool
	Took     time.Duration // from the call's first try to its end
	// Failure is how the call failed, as OpenTelemetry's error.type: the
	// provider's HTTP status ("429", "503") when it answered one, else
	// "_OTHER"; "" for a call that was answered.
	Failure string
}

// The operations a ModelCallStats names.
const (
	ModelChat       = "chat"
	ModelEmbeddings = "embeddings"
)

// ModelFailure is ModelCallStats.Failure for a call that got the HTTP
// status status (0: no answer) and ended with err.
func ModelFailure(status int, err error) string {
	switch {
	case status >= 400 && status <= 599:
		return strconv.Itoa(status)
	case err != nil || status != 0 && status/100 != 2:
		return "_OTHER"
	}
	return ""
}
