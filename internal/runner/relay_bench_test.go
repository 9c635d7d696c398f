package runner_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"corral/internal/modeltest"
	"corral/internal/relay"
	"corral/internal/relay/noderpc"
	"corral/internal/runner"
	"corral/internal/vethtest"
)

// relayed is the harness's node reached as control reaches a sandbox
// node: over a real relay (a WebSocket over TCP, yamux on it) whose
// control end listens on ln, every call a noderpc stream.
func relayed(b testing.TB, ln net.Listener, node noderpc.Node) *noderpc.Client {
	b.Helper()
	accepted := make(chan *relay.Session, 1)
	srv := httptest.NewUnstartedServer(relay.Handler(func(*http.Request) (string, error) { return "node", nil },
		func(_ string, s *relay.Session) { accepted <- s }, relay.Config{}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	b.Cleanup(srv.Close)
	nodeEnd, err := relay.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil, relay.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nodeEnd.Close() })
	go noderpc.Serve(nodeEnd, node, nil)
	control := <-accepted
	return noderpc.NewClient(control.Open)
}

// BenchmarkRunRelayed measures a run of 40 trivial shell calls (`true`)
// whose node is reached over the relay, as in the split roles, against
// the same run on the node in process (role all), alternated in the same
// iteration over the same store, sandbox and fake provider; relay/all is
// the ratio of their times (the goal is at most 1.2). On
// loopback, and on a veth pair to a network namespace where control's
// end of the relay listens (vethtest, root only).
//
//	go test -run '^$' -bench RunRelayed -benchtime 5x -count 3 ./internal/runner/
func BenchmarkRunRelayed(b *testing.B) {
	b.Run("loopback", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		benchRunRelayed(b, ln)
	})
	b.Run("veth", func(b *testing.B) {
		ln, err := vethtest.New(b).Listen(0)
		if err != nil {
			b.Fatal(err)
		}
		benchRunRelayed(b, ln)
	})
}

func benchRunRelayed(b *testing.B, ln net.Listener) {
	const calls = 40
	h := newHarness(b, func(req modeltest.Request) modeltest.Reply {
		if n := req.CountRole("tool"); n < calls {
			return modeltest.Calls(modeltest.ShellCall(fmt.Sprintf("c%d", n), "true"))
		}
		return modeltest.Text("done")
	})
	remote := relayed(b, ln, h.sessions)
	remoteChanges := newStages(h.db, remote)
	variants := []struct {
		name   string
		runner *runner.Runner
		spent  time.Duration
	}{
		{name: "all", runner: h.newRunner(h.db, h.gateway, runner.Config{MaxTurns: calls + 1})},
		{name: "relay", runner: func() *runner.Runner {
			r := runner.New(runner.Deps{Store: h.db, Model: h.gateway, Workspaces: remoteChanges, Node: remote}, runner.Config{MaxTurns: calls + 1})
			b.Cleanup(r.Close)
			return r
		}()},
	}
	i := 0
	for b.Loop() {
		for k := range variants {
			v := &variants[(i+k)%len(variants)]
			v.spent += timeRun(b, h, v.name, v.runner, "call true 40 times")
		}
		i++
	}
	all, rel := variants[0].spent, variants[1].spent
	b.ReportMetric(float64(rel)/float64(all), "relay/all")
	b.ReportMetric(float64(all.Microseconds())/1000/float64(i), "all-ms/run")
	b.ReportMetric(float64(rel.Microseconds())/1000/float64(i), "relay-ms/run")
}
