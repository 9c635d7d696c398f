package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"corral"
	"corral/internal/api"
)

// actorNode is a node that records the actor each terminal is opened for
// and each actor control hands on before a frame, as a relayed terminal
// would carry them to a sandbox node.
type actorNode struct {
	corral.Sessions
	mu     sync.Mutex
	opened []corral.Actor
	acts   []corral.Actor
}

func (n *actorNode) Terminal(ctx context.Context, sessionID string, cols, rows int) (corral.Terminal, error) {
	a, ok := corral.ActorOf(ctx)
	if !ok {
		return nil, corral.Errorf(corral.EFORBIDDEN, "no actor")
	}
	n.mu.Lock()
	n.opened = append(n.opened, a)
	n.mu.Unlock()
	t, err := n.Sessions.Terminal(ctx, sessionID, cols, rows)
	if err != nil {
		return nil, err
	}
	return &actingTerminal{Terminal: t, n: n}, nil
}

type actingTerminal struct {
	corral.Terminal
	n *actorNode
}

func (t *actingTerminal) Act(a corral.Actor) {
	t.n.mu.Lock()
	t.n.acts = append(t.n.acts, a)
	t.n.mu.Unlock()
}

// TestTerminalActorCarriesTheSession: the actor a terminal is opened for,
// and the one handed on before each frame, carry the person, the agent,
// their level, and the account session (or API token) the viewer is
// signed in with: the four fields a sandbox node replays access from.
func TestTerminalActorCarriesTheSession(t *testing.T) {
	needSandbox(t)
	rec := &actorNode{}
	e := newEnv(t, envOptions{wrapNode: func(n corral.Sessions) corral.Sessions { rec.Sessions = n; return rec }})
	owner := e.signup("owner@example.com", "Owner")
	var tok api.TokenView
	owner.do("POST", "/api/tokens", map[string]string{"name": "t"}).want(http.StatusCreated).decode(&tok)
	script := &client{e: e, bearer: tok.Token, user: owner.user}
	id := owner.createAgent("worker")
	var started struct{ Run api.RunView }
	owner.do("POST", "/api/agents/"+id+"/terminal", nil).want(http.StatusCreated).decode(&started)
	waitFor(t, "the run to start", func() bool { return owner.run(started.Run.ID).Status == "running" })

	for i, c := range []*client{owner, script} {
		term, _, err := c.terminal(started.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		term.typeIn("echo viewer-" + string(rune('a'+i)) + "\n")
		term.see("viewer-" + string(rune('a'+i)))
		term.c.CloseNow()
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.opened) != 2 || len(rec.acts) < 2 {
		t.Fatalf("opened for %+v, frames acted for %+v", rec.opened, rec.acts)
	}
	for i, prefix := range []string{"ses_", "tok_"} {
		a := rec.opened[i]
		if a.UserID != owner.user.ID || a.AgentID != id || a.Level != corral.LevelOwner || !strings.HasPrefix(a.SessionID, prefix) {
			t.Errorf("viewer %d's terminal opened for %+v, want the owner on %s through a %s…", i, a, id, prefix)
		}
	}
	if rec.opened[0].SessionID == rec.opened[1].SessionID {
		t.Errorf("a cookie and a token gave one session id %q", rec.opened[0].SessionID)
	}
	for _, a := range rec.acts {
		if a != rec.opened[0] && a != rec.opened[1] {
			t.Errorf("a frame acted for %+v, which opened no terminal", a)
		}
	}
}
