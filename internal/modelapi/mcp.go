package modelapi

// The delegation tools (list_agents, delegate, create_agent) for agent
// CLIs: an MCP server over streamable HTTP at /mcp, beside the model API,
// authorized the same way (the run's token, on its own session's
// connection). It is stateless: every request is authorized afresh and
// served by a server made for its grant, and nothing of it is kept between
// requests, so nothing outlives the run.

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"corral"
	"corral/internal/protocol"
)

// mcpKeepAlive is how often a tool call in progress writes an SSE comment
// on its answer: a delegate call waits for a whole child run (up to its
// timeout, 30 minutes by default), and an MCP client that has had no byte
// for a while may give up on it (Claude Code gives an HTTP server's answer
// five minutes to begin). Clients skip comments.
var mcpKeepAlive = 15 * time.Second

type mcpServerKey struct{}

type mcpWriterKey struct{}

// mcp serves MCP over streamable HTTP, every request as the run whose
// token it carries.
func (s *server) mcp() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		srv, _ := r.Context().Value(mcpServerKey{}).(*mcp.Server)
		return srv
	}, &mcp.StreamableHTTPOptions{Stateless: true, Logger: s.log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := s.authorize(w, r, protocol.Chat)
		if g == nil {
			return
		}
		sw := &sseWriter{w: w, req: r.Context()}
		defer sw.end()
		ctx := context.WithValue(r.Context(), mcpServerKey{}, mcpServer(g))
		ctx = context.WithValue(ctx, mcpWriterKey{}, sw)
		h.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// mcpServer is the MCP server of one request: the grant's tools, each call
// made through the grant.
func mcpServer(g corral.CLIGrant) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "corral", Version: "1"}, nil)
	for _, t := range g.Tools() {
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Parameters},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				args := string(req.Params.Arguments)
				if args == "" || args == "null" {
					args = "{}"
				}
				ctx, stop := inProgress(ctx)
				defer stop()
				text, isError := g.CallTool(ctx, req.Params.Name, args)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}, nil
			})
	}
	return srv
}

// inProgress is the context of a tool call of the request of ctx: it
// ends when the request does, so a client that gives up on a call, or
// goes away, cancels it (a delegated run it waited for is stopped). The
// SDK's own context does not end then: its stateless session waits for
// the call to finish. Until stop, an SSE comment is written on the call's
// answer at once (so its headers go out before the call ends) and then
// every mcpKeepAlive.
func inProgress(ctx context.Context) (context.Context, func()) {
	sw, _ := ctx.Value(mcpWriterKey{}).(*sseWriter)
	if sw == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(sw.req, cancel)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(mcpKeepAlive)
		defer tick.Stop()
		for {
			sw.comment()
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, func() {
		unhook()
		cancel()
		<-done
	}
}

// sseWriter is the ResponseWriter the MCP handler writes through: it lets
// keepAlive write comments between its events (the SDK writes each event
// in one Write), and nothing once the request has been answered.
type sseWriter struct {
	req   context.Context // the request's
	mu    sync.Mutex
	w     http.ResponseWriter
	ended bool
}

func (s *sseWriter) Header() http.Header { return s.w.Header() }

func (s *sseWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return 0, http.ErrHandlerTimeout
	}
	return s.w.Write(b)
}

func (s *sseWriter) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.w.WriteHeader(code)
	}
}

// FlushError is what http.ResponseController calls.
func (s *sseWriter) FlushError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return http.ErrHandlerTimeout
	}
	return http.NewResponseController(s.w).Flush()
}

// comment writes an SSE comment and flushes it, unless the answer is not
// an event stream (an error the SDK wrote) or has ended.
func (s *sseWriter) comment() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.w.Header().Get("Content-Type") != "text/event-stream" {
		return
	}
	s.w.Write([]byte(": corral is working on it\n\n"))
	http.NewResponseController(s.w).Flush()
}

func (s *sseWriter) end() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}
