package api_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"corral"
	"corral/internal/egresstest"
	"corral/internal/modeltest"
)

// egressRunSecret is the npm token the proxy adds at the edge: distinctive,
// so a copy of it anywhere is found.
const egressRunSecret = "npmtokenSECRETcorral9f3a7edge"

// rot13 hides a string from a command line that greps for it: the probe
// turns it back inside the sandbox with tr, so the tool call (and the
// trace and the model's view of it) never carries the secret itself.
func rot13(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return 'a' + (r-'a'+13)%26
		case r >= 'A' && r <= 'Z':
			return 'A' + (r-'A'+13)%26
		}
		return r
	}, s)
}

// egressUpstreams are the test's registry and module proxy, named (the
// tools inside never proxy a loopback address) and resolved by the egress
// proxy to loopback, which the env's --egress-allow-private allows.
type egressUpstreams struct {
	reg *egresstest.Registry
	gp  *egresstest.GoProxy
	env envOptions
}

func newEgressUpstreams(t *testing.T) egressUpstreams {
	reg := egresstest.NPMRegistry(t, egresstest.RegistryOptions{Header: "Authorization", Value: "Bearer " + egressRunSecret})
	gp := egresstest.ModuleProxy(t, egresstest.DefaultModuleProxyHost)
	lo := netip.MustParseAddr("127.0.0.1")
	resolver := egresstest.Resolver(map[string]netip.Addr{reg.Host: lo, gp.Host: lo})
	return egressUpstreams{reg: reg, gp: gp, env: envOptions{egressResolver: resolver, egressCA: reg.CAFile}}
}

// allow is the allow-list that reaches both upstreams, on their ports.
func (u egressUpstreams) allow(t *testing.T) map[string]any {
	rule := func(raw string) map[string]any {
		p, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		var port int
		fmt.Sscan(p.Port(), &port)
		return map[string]any{"host": p.Hostname(), "ports": []int{port}}
	}
	return map[string]any{"allow": []map[string]any{rule(u.reg.URL), rule(u.gp.URL)}}
}

// probe installs the registry's package with npm and downloads the
// module with go, each followed by its status, then counts the copies of
// the secret in every process's environment and in every file of /tmp
// and the workspace.
func (u egressUpstreams) probe() string {
	hidden := rot13(egressRunSecret)
	return `cd "$(mktemp -d)" && echo '{"name":"probe","version":"1.0.0"}' > package.json; ` +
		`npm install --registry=` + u.reg.URL + ` --no-audit --no-fund --cache=/tmp/npm-cache ` + egresstest.DefaultPackage + ` > /tmp/npm.log 2>&1; echo "npm=$?"; tail -n 5 /tmp/npm.log; ` +
		`node -e 'console.log("node: " + require("` + egresstest.DefaultPackage + `"))' 2>&1; ` +
		`GOPROXY=` + u.gp.URL + ` GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOTELEMETRY=off GOPATH=/tmp/gopath GOCACHE=/tmp/gocache ` +
		`/usr/local/go/bin/go mod download -json ` + egresstest.ModulePath + `@` + egresstest.ModuleVersion + ` > /tmp/go.log 2>&1; echo "go=$?"; grep '"Error"' /tmp/go.log; ` +
		`s=$(printf %s '` + hidden + `' | tr 'a-zA-Z' 'n-za-mN-ZA-M'); ` +
		`echo "environ=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c "$s")"; ` +
		`echo "files=$(grep -rl "$s" /tmp /workspace 2>/dev/null | wc -l)"; ` +
		`echo "proxy=$HTTPS_PROXY"`
}

// TestEgressInstallsInRuns: a real npm install and a real go mod download,
// from the test's registry and module proxy, inside a run of each driver,
// through the egress proxy: the registry's token is added at the edge and
// is nowhere inside the run, in its trace, in an answer or in the log. The
// same run with network none fails, and its trace says what was refused.
func TestEgressInstallsInRuns(t *testing.T) {
	needSandbox(t)
	for _, tool := range []string{"npm", "node", "/usr/local/go/bin/go", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed inside the sandbox (from the host's read-only system): %v", tool, err)
		}
	}
	cases := append([]cliCase{{driver: corral.DriverBuiltin, tool: "shell", args: func(cmd string) map[string]string {
		return map[string]string{"command": cmd}
	}}}, cliCases...)
	for _, tc := range cases {
		t.Run(tc.driver, func(t *testing.T) {
			if tc.driver != corral.DriverBuiltin {
				slow(t)
				needTools(t, tc.driver)
			}
			u := newEgressUpstreams(t)
			var logs lockedBuffer
			opt := u.env
			opt.api.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			e := newEnv(t, opt)
			owner := e.signup("owner@example.com", "Owner")
			id := owner.createAgent("egress-" + tc.driver)
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"driver": tc.driver,
				"policy": map[string]any{"network": "allowlist", "egress": u.allow(t)}}).want(http.StatusOK)
			owner.do("POST", "/api/agents/"+id+"/secrets", map[string]string{"name": "npm", "host": u.reg.Host,
				"header": "Authorization", "value": "Bearer " + egressRunSecret}).want(http.StatusCreated)

			var mu sync.Mutex
			var out string
			e.answer(func(r modeltest.Request) modeltest.Reply {
				if res := r.LastToolResults(); len(res) > 0 {
					mu.Lock()
					out = res[len(res)-1].Content
					mu.Unlock()
					return modeltest.Text("installed")
				}
				if !contains(r.Tools, tc.tool) {
					return modeltest.Text("Install") // a CLI's side request (a title)
				}
				args, _ := json.Marshal(tc.args(u.probe()))
				return modeltest.Calls(modeltest.ToolCall{ID: "call_install", Name: tc.tool, Arguments: string(args)})
			})
			output := func() string {
				mu.Lock()
				defer mu.Unlock()
				return out
			}

			run := owner.send(id, "Install the dependencies.")
			done := owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
			if done.Status != "completed" {
				t.Fatalf("run %s: %s (%s)\ntrace: %s", run.ID, done.Status, done.Reason, brief(owner.trace(run.ID)))
			}
			got := output()
			t.Logf("inside the run:\n%s", got)
			for _, want := range []string{"npm=0", "node: " + egresstest.Works, "go=0", "environ=0", "files=0", "proxy=http://" + corral.EgressAddr} {
				if !strings.Contains(got, want) {
					t.Errorf("inside the run: %q missing from its output:\n%.2000s", want, got)
				}
			}
			var saw int
			for _, r := range u.reg.Requests() {
				saw++
				if !r.Authorized || r.Header.Get("Authorization") != "Bearer "+egressRunSecret {
					t.Errorf("the registry got %s %s without the token added at the edge", r.Method, r.Path)
				}
			}
			if saw == 0 || len(u.gp.Requests()) == 0 {
				t.Errorf("the registry saw %d requests, the module proxy %d: want both reached", saw, len(u.gp.Requests()))
			}
			events := owner.trace(run.ID)
			hosts := map[string]bool{}
			for _, ev := range events {
				if ev.Type == "egress" {
					var d struct{ Host string }
					json.Unmarshal(ev.Data, &d)
					hosts[d.Host] = true
				}
			}
			if !hosts[u.reg.Host] || !hosts[u.gp.Host] {
				t.Errorf("the trace sums traffic for %v, want %s and %s\ntrace: %s", hosts, u.reg.Host, u.gp.Host, brief(events))
			}

			// The same with network none: refused by the proxy, by name.
			owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]any{"network": "none"}}).want(http.StatusOK)
			mu.Lock()
			out = ""
			mu.Unlock()
			before := len(u.reg.Requests())
			run = owner.send(id, "Install the dependencies again.")
			done = owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
			got = output()
			if strings.Contains(got, "npm=0") || strings.Contains(got, "go=0") || !strings.Contains(got, "npm=") {
				t.Errorf("with network none: %s (%s), output:\n%.2000s", done.Status, done.Reason, got)
			}
			if n := len(u.reg.Requests()); n != before {
				t.Errorf("with network none the registry saw %d more requests", n-before)
			}
			denied := 0
			for _, ev := range owner.trace(run.ID) {
				if ev.Type == "egress_denied" {
					denied++
				}
			}
			if denied == 0 {
				t.Errorf("with network none the trace records no egress_denied: %s", brief(owner.trace(run.ID)))
			}
			var sealed []byte
			if err := e.rawDB(t).QueryRow(`SELECT sealed FROM agent_secrets WHERE agent_id = ?`, id).Scan(&sealed); err != nil {
				t.Fatal(err)
			}
			assertAbsent(t, e, logs.String(), egressRunSecret, sealed)
		})
	}
}

// TestEgressRefusalsInRun: from inside a run, what the proxy and the
// sandbox refuse, and an allow-list edited while the run goes, which the
// run's next connection obeys.
func TestEgressRefusalsInRun(t *testing.T) {
	needSandbox(t)
	u := newEgressUpstreams(t)
	e := newEnv(t, u.env)
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("refusals")
	allow := u.allow(t)
	regOnly := map[string]any{"allow": allow["allow"].([]map[string]any)[:1]}
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]any{"network": "allowlist", "egress": regOnly}}).want(http.StatusOK)
	regPort := strings.TrimSuffix(u.reg.URL[strings.LastIndex(u.reg.URL, ":")+1:], "/")
	list := u.gp.URL + "/" + egresstest.ModulePath + "/@v/list"

	steps := []struct {
		name, cmd string
		before    func() // what the test does before the step's command runs
		want      []string
	}{
		{name: "refused", cmd: `curl -s -o /dev/null -w 'code=%{http_code}\n' ` + list + `; curl -s ` + list, want: []string{"code=403", "corral egress"}},
		{name: "past the proxy", cmd: `curl -s --noproxy '*' -m 5 http://203.0.113.7/ ; echo "direct=$?"; getent hosts ` + u.reg.Host + `; echo "dns=$?"`,
			want: []string{"direct=7", "dns=2"}},
		{name: "an address for an allowed name", cmd: `curl -s -o /dev/null -w 'code=%{http_code}\n' -k https://127.0.0.2:` + regPort + `/; echo "exit=$?"`,
			want: []string{"exit=56"}},
		{name: "refused in a loop", cmd: `for i in $(seq 250); do curl -s -o /dev/null http://elsewhere.example:81/; done; echo looped`,
			want: []string{"looped"}},
		{name: "allowed mid-run", cmd: `curl -s -w '\ncode=%{http_code}\n' ` + list, want: []string{egresstest.ModuleVersion, "code=200"},
			before: func() {
				owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]any{"egress": allow}}).want(http.StatusOK)
			}},
	}
	var mu sync.Mutex
	outs := map[string]string{}
	e.answer(func(r modeltest.Request) modeltest.Reply {
		res := r.LastToolResults()
		n := r.CountRole("tool")
		if len(res) > 0 {
			mu.Lock()
			outs[steps[n-1].name] = res[len(res)-1].Content
			mu.Unlock()
		}
		if n == len(steps) {
			return modeltest.Text("done")
		}
		if steps[n].before != nil {
			steps[n].before()
		}
		args, _ := json.Marshal(map[string]string{"command": steps[n].cmd})
		return modeltest.Calls(modeltest.ToolCall{ID: fmt.Sprintf("call_%d", n), Name: "shell", Arguments: string(args)})
	})
	run := owner.send(id, "Try the network.")
	done := owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
	if done.Status != "completed" {
		t.Fatalf("run: %s (%s)\ntrace: %s", done.Status, done.Reason, brief(owner.trace(run.ID)))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range steps {
		for _, want := range s.want {
			if !strings.Contains(outs[s.name], want) {
				t.Errorf("%s: %q missing from:\n%.1500s", s.name, want, outs[s.name])
			}
		}
	}
	var denied []string
	truncated := 0
	for _, ev := range owner.trace(run.ID) {
		if ev.Type == "egress_denied" {
			var d struct {
				Host      string
				Port      int
				Rule      string
				Truncated bool
			}
			json.Unmarshal(ev.Data, &d)
			if d.Truncated {
				truncated++
				continue
			}
			denied = append(denied, fmt.Sprintf("%s:%d", d.Host, d.Port))
		}
	}
	// A loop of refusals fills the trace up to a bound, then says so once.
	if len(denied) != 200 || truncated != 1 {
		t.Errorf("%d egress_denied events and %d saying the rest were left out, want 200 and 1", len(denied), truncated)
	}
	if !contains(denied, u.gp.Host+":"+u.gp.URL[strings.LastIndex(u.gp.URL, ":")+1:]) || !contains(denied, "127.0.0.2:"+regPort) {
		t.Errorf("egress_denied events for %v, want the module proxy's host and the bare address", denied)
	}
}

// TestEgressCapEndsRun: a run that moves more than --egress-max-bytes
// through the proxy ends as an egress violation.
func TestEgressCapEndsRun(t *testing.T) {
	needSandbox(t)
	u := newEgressUpstreams(t)
	opt := u.env
	opt.egressMaxBytes = 2000
	e := newEnv(t, opt)
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("capped")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]any{"network": "allowlist", "egress": u.allow(t)}}).want(http.StatusOK)
	cmd := `for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null ` + u.gp.URL + "/" + egresstest.ModulePath + `/@v/` + egresstest.ModuleVersion + `.zip; done; sleep 30`
	e.answer(func(r modeltest.Request) modeltest.Reply {
		if len(r.LastToolResults()) > 0 {
			return modeltest.Text("done")
		}
		args, _ := json.Marshal(map[string]string{"command": cmd})
		return modeltest.Calls(modeltest.ToolCall{ID: "call_cap", Name: "shell", Arguments: string(args)})
	})
	run := owner.send(id, "Download a lot.")
	done := owner.waitRun(run.ID, "completed", "errored", "killed", "cancelled", "paused")
	if done.Status != "errored" || done.Violation == nil || *done.Violation != string(corral.ViolationEgress) || !strings.Contains(done.Reason, "egress") {
		t.Fatalf("run: %s violation %v (%s), want errored with violation egress\ntrace: %s", done.Status, done.Violation, done.Reason, brief(owner.trace(run.ID)))
	}
}
