package api_test

import (
	"corral/internal/api"
	"corral/internal/service"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral"
)

// inbox is what GET /api/changes?status=pending answers c, as "agent
// name: pending/total" per change set, newest first.
func (c *client) inbox(t *testing.T) []string {
	t.Helper()
	var got api.List[api.WaitingView]
	c.do("GET", "/api/changes?status=pending", nil).want(http.StatusOK).decode(&got)
	out := []string{}
	for _, w := range got.Items {
		if w.Status != string(corral.ChangePending) {
			t.Errorf("inbox item %s has status %q", w.ID, w.Status)
		}
		out = append(out, fmt.Sprintf("%s: %d/%d", w.AgentName, w.PendingEntries, w.TotalEntries))
	}
	return out
}

func (c *client) pendingChanges(t *testing.T, agentID string) int {
	t.Helper()
	var a api.AgentView
	c.do("GET", "/api/agents/"+agentID, nil).want(http.StatusOK).decode(&a)
	var listed api.List[api.AgentView]
	c.do("GET", "/api/agents", nil).want(http.StatusOK).decode(&listed)
	for _, l := range listed.Items {
		if l.ID == agentID && l.PendingChanges != a.PendingChanges {
			t.Errorf("GET /api/agents says %d pending change sets on %s, GET /api/agents/{id} %d", l.PendingChanges, agentID, a.PendingChanges)
		}
	}
	return a.PendingChanges
}

// TestInbox: each person's inbox holds the change sets they may decide
// (editor and owner, as approve needs), newest first; a viewer's and a
// stranger's hold none; the agent's count falls as sets are decided.
func TestInbox(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	editor := e.signup("editor@example.com", "Editor")
	viewer := e.signup("viewer@example.com", "Viewer")
	stranger := e.signup("stranger@example.com", "Stranger")
	shared := owner.createAgent("shared")
	private := owner.createAgent("private")
	owner.grant(shared, editor.user.ID, "editor")
	owner.grant(shared, viewer.user.ID, "viewer")

	for _, c := range []*client{owner, editor, viewer, stranger} {
		if got := c.inbox(t); len(got) != 0 {
			t.Fatalf("%s's inbox before any run: %v, want empty", c.user.Name, got)
		}
	}
	two := e.propose(t, shared, func(tree string) {
		write(t, filepath.Join(tree, "hello.txt"), "hello\n")
		write(t, filepath.Join(tree, "notes.txt"), "notes\n")
	})
	e.clock.Advance(time.Minute)
	e.propose(t, private, func(tree string) { write(t, filepath.Join(tree, "todo.txt"), "todo\n") })

	for _, c := range []struct {
		name string
		who  *client
		want []string
	}{
		{"the owner sees both, newest first", owner, []string{"private: 1/1", "shared: 2/2"}},
		{"an editor sees the shared agent's", editor, []string{"shared: 2/2"}},
		{"a viewer may not decide: none", viewer, []string{}},
		{"a stranger sees none", stranger, []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.who.inbox(t); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("inbox = %v, want %v", got, c.want)
			}
		})
	}
	var items api.List[api.WaitingView]
	editor.do("GET", "/api/changes?status=pending", nil).want(http.StatusOK).decode(&items)
	if w := items.Items[0]; w.ID != two.ID || w.AgentID != shared || w.RunID != nil || w.CreatedAt == "" || w.ExpiresAt == "" {
		t.Fatalf("inbox item = %+v, want change set %s of agent %s with no run", w, two.ID, shared)
	}
	if n := viewer.pendingChanges(t, shared); n != 1 {
		t.Fatalf("a viewer reads %d pending change sets on the shared agent, want 1", n)
	}

	// Half decided: still waiting, one file fewer.
	editor.do("POST", "/api/changes/"+two.ID+"/approve", map[string][]string{"paths": {"hello.txt"}}).want(http.StatusOK)
	if got := editor.inbox(t); !reflect.DeepEqual(got, []string{"shared: 1/2"}) {
		t.Fatalf("inbox after approving one file = %v, want shared: 1/2", got)
	}
	if n := owner.pendingChanges(t, shared); n != 1 {
		t.Fatalf("pending change sets after a partial decision = %d, want 1", n)
	}
	editor.do("POST", "/api/changes/"+two.ID+"/reject", nil).want(http.StatusOK)
	if n := owner.pendingChanges(t, shared); n != 0 {
		t.Fatalf("pending change sets after the decision = %d, want 0", n)
	}
	if got := editor.inbox(t); len(got) != 0 {
		t.Fatalf("the editor's inbox after the decision = %v, want empty", got)
	}
	if got := owner.inbox(t); !reflect.DeepEqual(got, []string{"private: 1/1"}) {
		t.Fatalf("the owner's inbox after the decision = %v, want the private agent's", got)
	}

	for _, q := range []string{"", "?status=applied", "?status=PENDING", "?status=pending&status=applied"} {
		res := owner.do("GET", "/api/changes"+q, nil).want(http.StatusBadRequest)
		if res.code() != corral.EINVALID {
			t.Errorf("GET /api/changes%s: code %q, want %q", q, res.code(), corral.EINVALID)
		}
	}
}

// TestSetup: a brand-new server says so to anyone, and nothing more; the
// first signup (the admin) ends it.
func TestSetup(t *testing.T) {
	for _, c := range []struct{ mode, want string }{{"", "open"}, {"invite", "invite"}, {"closed", "closed"}} {
		t.Run("signup "+c.want, func(t *testing.T) {
			e := newEnv(t, envOptions{signup: c.mode})
			setup := func() map[string]any {
				var got map[string]any
				e.anon().do("GET", "/api/setup", nil).want(http.StatusOK).decode(&got)
				return got
			}
			if got, want := setup(), map[string]any{"first_run": true, "signup": c.want}; !reflect.DeepEqual(got, want) {
				t.Fatalf("setup on a new server = %v, want %v", got, want)
			}
			if c.mode != "" {
				return // signup needs an invite or is closed: the admin is made on the command line
			}
			admin := e.signup("first@example.com", "First")
			if !admin.user.Admin {
				t.Fatal("the first account is not an admin")
			}
			if got, want := setup(), map[string]any{"first_run": false, "signup": "open"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("setup after the first signup = %v, want %v", got, want)
			}
		})
	}
}

// TestModels: the picker's list is the gateway's default model first, then
// the others the provider lists, never the provider's address or key; a
// provider that lists none gives the default alone, and no provider an
// empty list that says so.
func TestModels(t *testing.T) {
	for _, c := range []struct {
		name   string
		opt    envOptions
		listed []string // what the provider answers on GET /v1/models; nil: 404
		want   api.ModelsView
	}{
		{"the provider lists its models", envOptions{}, []string{"zeta-model", "test-model", "alpha-model", "alpha-model", "bad\nname"},
			api.ModelsView{Models: []api.ModelView{{ID: "test-model"}, {ID: "alpha-model"}, {ID: "zeta-model"}}, Default: "test-model", Configured: true, Listed: true}},
		{"the provider lists none", envOptions{}, nil,
			api.ModelsView{Models: []api.ModelView{{ID: "test-model"}}, Default: "test-model", Configured: true}},
		{"no provider", envOptions{noModel: true}, nil, api.ModelsView{Models: []api.ModelView{}, Configured: false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.opt)
			e.model.SetModels(c.listed...)
			u := e.signup("u@example.com", "U")
			res := u.do("GET", "/api/models", nil).want(http.StatusOK)
			var got api.ModelsView
			res.decode(&got)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("models = %+v, want %+v", got, c.want)
			}
			for _, secret := range []string{testModelKey, e.model.URL(), "127.0.0.1"} {
				if strings.Contains(string(res.body), secret) {
					t.Fatalf("GET /api/models answers %s, which holds %q", res.body, secret)
				}
			}
			if c.listed == nil {
				return
			}
			// Asked again within minutes: the list is kept, not asked for.
			e.model.SetModels("newer-model")
			var again api.ModelsView
			u.do("GET", "/api/models", nil).want(http.StatusOK).decode(&again)
			if !reflect.DeepEqual(again, c.want) {
				t.Fatalf("models asked again = %+v, want the list kept: %+v", again, c.want)
			}
		})
	}
}

// TestLimits: the defaults are the constants that apply them (null where
// there is no limit), and each max is exactly what an update accepts.
func TestLimits(t *testing.T) {
	e := newEnv(t, envOptions{})
	u := e.signup("u@example.com", "U")
	id := u.createAgent("bounded")
	res := u.do("GET", "/api/limits", nil).want(http.StatusOK)
	var got struct {
		Defaults map[string]*int64 `json:"defaults"`
		Max      map[string]int64  `json:"max"`
		Notes    map[string]string `json:"notes"`
	}
	res.decode(&got)
	n := func(v int64) *int64 { return &v }
	want := map[string]*int64{
		"max_prompt_bytes":   n(service.DefaultMaxPrompt),
		"max_runs":           nil,
		"run_timeout_s":      n(corral.DefaultRunTimeoutS),
		"cpu_millis":         n(corral.DefaultRunTimeoutS * 1000),
		"memory_bytes":       n(corral.DefaultMemoryBytes),
		"pids":               n(corral.DefaultPids),
		"output_bytes":       n(corral.DefaultOutputBytes),
		"disk_bytes":         n(corral.DefaultDiskBytes),
		"disk_inodes":        n(corral.DefaultDiskInodes),
		"pending_disk_bytes": n(corral.DefaultPendingDiskBytes),
	}
	if !reflect.DeepEqual(got.Defaults, want) {
		g, _ := json.Marshal(got.Defaults)
		w, _ := json.Marshal(want)
		t.Fatalf("defaults = %s, want %s", g, w)
	}
	if got.Notes["max_runs"] == "" || got.Notes["cpu_millis"] == "" {
		t.Errorf("notes = %v, want words for max_runs and cpu_millis", got.Notes)
	}
	var fields api.LimitsView
	b, _ := json.Marshal(fields)
	var names map[string]any
	json.Unmarshal(b, &names)
	if len(got.Max) != len(names) {
		t.Fatalf("max has %d fields, the agent's limits %d", len(got.Max), len(names))
	}
	for name := range names {
		max, ok := got.Max[name]
		if !ok || max <= 0 {
			t.Errorf("max.%s = %d, %v; want a positive bound", name, max, ok)
			continue
		}
		u.do("PATCH", "/api/agents/"+id, map[string]any{"limits": map[string]int64{name: max}}).want(http.StatusOK)
		u.do("PATCH", "/api/agents/"+id, map[string]any{"limits": map[string]int64{name: max + 1}}).want(http.StatusBadRequest)
	}
}
