package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/internal/api"
	"corral/internal/modeltest"
)

// TestEditDuringRunIsNotLost is the lost update: an editor changes a file
// in the persistent workspace while a run that changes the same file is
// still working. Approving the run's change set must not overwrite the
// editor's content; the answer says why. An edit to another file does not
// stand in the way of the rest.
func TestEditDuringRunIsNotLost(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("builder")
	owner.do("PUT", "/api/agents/"+id+"/files?path=f.txt", "original\n").want(http.StatusOK)
	owner.do("PUT", "/api/agents/"+id+"/files?path=g.txt", "g original\n").want(http.StatusOK)
	hold := make(chan struct{})
	e.answer(modeltest.Sequence(
		modeltest.Calls(
			modeltest.WriteCall("c1", "f.txt", "the run's version\n"),
			modeltest.WriteCall("c2", "h.txt", "new from the run\n"),
		),
		// The run is still going while this answer is held.
		modeltest.Reply{Content: "done", Block: hold},
	))
	run := owner.send(id, "edit f.txt")
	owner.waitTrace(run.ID, "tool_result")
	waitFor(t, "the second tool result", func() bool {
		n := 0
		for _, ev := range owner.trace(run.ID) {
			if ev.Type == "tool_result" {
				n++
			}
		}
		return n == 2
	})
	if r := owner.run(run.ID); r.Status != "running" {
		t.Fatalf("run is %s before the edit, want running", r.Status)
	}
	owner.do("PUT", "/api/agents/"+id+"/files?path=f.txt", "the editor's version\n").want(http.StatusOK)
	owner.do("PUT", "/api/agents/"+id+"/files?path=g.txt", "g edited\n").want(http.StatusOK)
	close(hold)
	done := owner.waitRun(run.ID, "completed", "errored")
	if done.Status != "completed" || done.ChangeSetID == nil {
		t.Fatalf("run = %+v", done)
	}

	var cs api.ChangeSetView
	owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
	byPath := map[string]api.ChangeEntryView{}
	for _, en := range cs.Entries {
		byPath[en.Path] = en
	}
	if f := byPath["f.txt"]; f.Op != "modify" || f.OldSHA256 != sha("original\n") {
		t.Fatalf("f.txt entry = %+v, want a modify based on what the run saw (%s)", f, sha("original\n"))
	}
	if _, ok := byPath["g.txt"]; ok {
		t.Fatalf("g.txt is in the change set, though the run never touched it: %+v", cs.Entries)
	}

	res := owner.do("POST", "/api/changes/"+cs.ID+"/approve", nil).want(http.StatusConflict)
	if res.code() != "conflict" || !strings.Contains(string(res.body), "f.txt") || !strings.Contains(string(res.body), "changed in the workspace") {
		t.Fatalf("approve = %s, want a conflict naming f.txt", res.body)
	}
	if got := owner.file(id, "f.txt"); got != "the editor's version\n" {
		t.Fatalf("f.txt = %q after approve: the editor's edit was lost", got)
	}
	owner.do("GET", "/api/changes/"+cs.ID, nil).want(http.StatusOK).decode(&cs)
	for _, en := range cs.Entries {
		want := map[string]string{"f.txt": "conflicted", "h.txt": "pending"}[en.Path]
		if en.State != want {
			t.Fatalf("entry %s is %s, want %s", en.Path, en.State, want)
		}
	}
	// The entry that does not conflict can still be approved on its own.
	owner.do("POST", "/api/changes/"+cs.ID+"/approve", map[string]any{"paths": []string{"h.txt"}}).want(http.StatusOK).decode(&cs)
	if cs.Status != "applied" || owner.file(id, "h.txt") != "new from the run\n" {
		t.Fatalf("after approving h.txt: %+v", cs)
	}
	if got := owner.file(id, "g.txt"); got != "g edited\n" {
		t.Fatalf("g.txt = %q", got)
	}
}

// TestPartialDecisions decides a change set entry by entry: exactly the
// chosen entries are applied or rejected, the set stays pending while any
// entry is, and the diffs stay readable once it is decided.
func TestPartialDecisions(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("partial")
	owner.do("PUT", "/api/agents/"+id+"/files?path=keep.txt", "one\n").want(http.StatusOK)
	cs := e.propose(t, id, func(tree string) {
		write(t, filepath.Join(tree, "fix.go"), "package fix\n")
		write(t, filepath.Join(tree, "build/out.bin"), "\x00\x01artefact")
		write(t, filepath.Join(tree, "keep.txt"), "two\n")
		write(t, filepath.Join(tree, ".git/config"), "[core]\n")
	})
	path := "/api/changes/" + cs.ID
	ws := filepath.Join(e.dataDir, "workspaces", id)

	for _, tc := range []struct {
		name string
		body any
		want int
	}{
		{"unknown path", map[string]any{"paths": []string{"nope.txt"}}, http.StatusBadRequest},
		{"empty list", map[string]any{"paths": []string{}}, http.StatusBadRequest},
		{"protected entry", map[string]any{"paths": []string{".git/config"}}, http.StatusBadRequest},
		{"unknown field", map[string]any{"path": []string{"fix.go"}}, http.StatusBadRequest},
		{"not a list", map[string]any{"paths": "fix.go"}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner.do("POST", path+"/approve", tc.body).want(tc.want)
		})
	}

	var got api.ChangeSetView
	owner.do("POST", path+"/approve", map[string]any{"paths": []string{"fix.go"}}).want(http.StatusOK).decode(&got)
	states := func(v api.ChangeSetView) map[string]string {
		m := map[string]string{}
		for _, en := range v.Entries {
			m[en.Path] = en.State
		}
		return m
	}
	if s := states(got); got.Status != "pending" || s["fix.go"] != "applied" || s["build/out.bin"] != "pending" || s["keep.txt"] != "pending" || s[".git/config"] != "denied" {
		t.Fatalf("after approving fix.go: %s %v", got.Status, s)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "fix.go")); string(b) != "package fix\n" {
		t.Fatalf("fix.go = %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "build")); !os.IsNotExist(err) {
		t.Fatal("an entry nobody approved was applied")
	}
	owner.do("POST", path+"/approve", map[string]any{"paths": []string{"fix.go"}}).want(http.StatusBadRequest)

	owner.do("POST", path+"/reject", map[string]any{"paths": []string{"build/out.bin"}}).want(http.StatusOK).decode(&got)
	if s := states(got); got.Status != "pending" || s["build/out.bin"] != "rejected" || s["keep.txt"] != "pending" {
		t.Fatalf("after rejecting the artefact: %s %v", got.Status, s)
	}
	// No body: the rest.
	owner.do("POST", path+"/approve", nil).want(http.StatusOK).decode(&got)
	if s := states(got); got.Status != "applied" || s["keep.txt"] != "applied" || s["build/out.bin"] != "rejected" {
		t.Fatalf("after approving the rest: %s %v", got.Status, s)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "keep.txt")); string(b) != "two\n" {
		t.Fatalf("keep.txt = %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "build")); !os.IsNotExist(err) {
		t.Fatal("the rejected artefact was applied")
	}
	owner.do("POST", path+"/reject", nil).want(http.StatusConflict)

	// Kept diffs: the staged tree is gone, the diffs are not.
	if stages, _ := os.ReadDir(filepath.Join(e.dataDir, "stages")); len(stages) != 0 {
		t.Fatalf("staged trees left after the decision: %v", stages)
	}
	owner.do("GET", path, nil).want(http.StatusOK).decode(&got)
	for _, en := range got.Entries {
		switch en.Path {
		case "keep.txt":
			if en.Diff == nil || !strings.Contains(*en.Diff, "-one") || !strings.Contains(*en.Diff, "+two") {
				t.Errorf("keep.txt diff after apply = %v", en.Diff)
			}
		case "fix.go":
			if en.Diff == nil || !strings.Contains(*en.Diff, "+package fix") {
				t.Errorf("fix.go diff after apply = %v", en.Diff)
			}
		case "build/out.bin", ".git/config":
			if en.Diff != nil {
				t.Errorf("%s has a diff: %q", en.Path, *en.Diff)
			}
		}
	}
	// Rejected and expired sets keep theirs too.
	cs = e.propose(t, id, func(tree string) { write(t, filepath.Join(tree, "r.txt"), "rejected\n") })
	owner.do("POST", "/api/changes/"+cs.ID+"/reject", nil).want(http.StatusOK).decode(&got)
	if got.Status != "rejected" || got.Entries[0].Diff == nil || !strings.Contains(*got.Entries[0].Diff, "+rejected") {
		t.Fatalf("rejected set = %+v", got)
	}
}

// TestDotfilesAndSecretsThroughTheFilesAPI: dotfiles are ordinary paths for
// uploads and reads, and secret files are the editors' alone.
func TestDotfilesAndSecretsThroughTheFilesAPI(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	viewer := e.signup("viewer@example.com", "Viewer")
	id := owner.createAgent("dots")
	owner.grant(id, viewer.user.ID, "viewer")
	for _, p := range []string{".gitignore", ".github/workflows/ci.yml", "sub/.editorconfig", ".env", "config/.env.local"} {
		owner.do("PUT", "/api/agents/"+id+"/files?path="+p, "content of "+p).want(http.StatusOK)
		if got := owner.file(id, p); got != "content of "+p {
			t.Fatalf("%s read back as %q", p, got)
		}
	}
	if got := viewer.file(id, ".github/workflows/ci.yml"); got != "content of .github/workflows/ci.yml" {
		t.Fatalf("viewer reads ci.yml as %q", got)
	}
	for _, p := range []string{".env", "config/.env.local"} {
		viewer.do("GET", "/api/agents/"+id+"/files?path="+p, nil).want(http.StatusNotFound)
	}
	var dir api.FileView
	viewer.do("GET", "/api/agents/"+id+"/files?path=", nil).want(http.StatusOK).decode(&dir)
	names := map[string]bool{}
	for _, en := range dir.Entries {
		names[en.Name] = true
	}
	if names[".env"] || !names[".gitignore"] || !names[".github"] {
		t.Fatalf("viewer's listing = %v", names)
	}
	owner.do("GET", "/api/agents/"+id+"/files?path=", nil).want(http.StatusOK).decode(&dir)
	names = map[string]bool{}
	for _, en := range dir.Entries {
		names[en.Name] = true
	}
	if !names[".env"] {
		t.Fatalf("owner's listing = %v, want .env in it", names)
	}
}

// TestHostileNamesFromARun: names the files API refuses, created by an
// agent inside a run in auto mode, are never applied, and each is shown
// escaped exactly as its bytes are; names that collide where case or
// Unicode normalisation is folded are flagged and wait for a person.
func TestHostileNamesFromARun(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("hostile")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]string{"changes": "auto"}}).want(http.StatusOK)
	owner.do("PUT", "/api/agents/"+id+"/files?path=Existing.md", "here before\n").want(http.StatusOK)

	tests := []struct {
		name    string
		octal   string // the name as printf(1) octal escapes: what the shell writes
		escaped string // what the reviewer must be shown
		flag    string
		class   string
	}{
		{"control character", `ctl\001x`, `ctl\x01x`, "name", "protected"},
		{"newline", `new\nline`, `new\nline`, "name", "protected"},
		{"escape sequence", `\033[31mred`, `\x1b[31mred`, "name", "protected"},
		{"bidi override", `evil\342\200\256txt.exe`, `evil\u202etxt.exe`, "name", "protected"},
		{"zero width", `zero\342\200\213width`, `zero\u200bwidth`, "name", "protected"},
		{"invalid utf-8", `bad\377name`, `bad\xffname`, "name", "protected"},
		{"git short name", `GIT~1/config`, `GIT~1/config`, "name", "protected"},
		{"git with invisible", `.g\342\200\213it/config`, `.g\u200bit/config`, "name", "protected"},
		{"git with hfs ignorable", `.g\342\201\252it/hooks`, `.g\u206ait/hooks`, "name", "protected"},
		{"device name", `CON`, `CON`, "name", "protected"},
		{"device with extension", `docs/nul.txt`, `docs/nul.txt`, "name", "protected"},
		{"trailing dot", `trail.`, `trail.`, "name", "protected"},
		{"not nfc", `cafe\314\201.txt`, "cafe\u0301.txt", "name", "protected"},
		{"case collision in the set", `Readme.TXT`, `Readme.TXT`, "collision", "risky"},
		{"case collision with the workspace", `existing.md`, `existing.md`, "collision", "risky"},
		{"directory case collision", `SRC/b.go`, `SRC/b.go`, "collision", "risky"},
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, tc := range tests {
		// printf makes the bytes; the path's directories first.
		script.WriteString(`n=$(printf '` + tc.octal + `x'); n=${n%x}; mkdir -p "$(dirname "$n")"; printf 'hostile\n' > "$n"` + "\n")
	}
	script.WriteString("printf 'x\\n' > readme.txt; mkdir -p src; printf 'package src\\n' > src/a.go; printf 'fine\\n' > ok.txt\n")
	e.answer(modeltest.Sequence(
		modeltest.Calls(modeltest.ShellCall("c1", script.String())),
		modeltest.Text("made them"),
	))
	run := owner.send(id, "make hostile names")
	done := owner.waitRun(run.ID, "completed", "errored")
	if done.Status != "completed" || done.ChangeSetID == nil {
		t.Fatalf("run = %+v; tool results %q", done, e.toolResults())
	}
	var cs api.ChangeSetView
	res := owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK)
	res.decode(&cs)
	for _, c := range string(res.body) {
		if c < 0x20 && c != '\n' || c == 0x202e || c == 0x200b {
			t.Fatalf("the change set answer carries a raw control or invisible character %U", c)
		}
	}
	byEscaped := map[string]api.ChangeEntryView{}
	for _, en := range cs.Entries {
		byEscaped[en.PathEscaped] = en
	}
	ws := filepath.Join(e.dataDir, "workspaces", id)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			en, ok := byEscaped[tc.escaped]
			if !ok {
				t.Fatalf("no entry shown as %q; entries: %v", tc.escaped, keys(byEscaped))
			}
			if en.Class != tc.class || !contains(en.Flags, tc.flag) || en.Note == "" {
				t.Fatalf("%q: class %s, flags %v, note %q; want %s with %s and a note", tc.escaped, en.Class, en.Flags, en.Note, tc.class, tc.flag)
			}
			if en.State == "applied" {
				t.Fatalf("%q was applied in auto mode", tc.escaped)
			}
			if en.Diff != nil {
				// One file of one line: exactly one hunk, under headers that
				// carry the escaped name on a line of their own.
				d := *en.Diff
				if !strings.HasPrefix(d, "--- a/"+tc.escaped+"\n+++ b/"+tc.escaped+"\n@@ ") || strings.Count(d, "\n@@ ") != 1 {
					t.Errorf("%q: diff = %q, want one hunk under escaped headers", tc.escaped, d)
				}
			} else if en.Class != "protected" {
				t.Errorf("%q: a %s text entry has no diff", tc.escaped, en.Class)
			}
			if _, err := os.Lstat(filepath.Join(ws, en.Path)); err == nil {
				t.Fatalf("%q exists in the workspace", tc.escaped)
			}
		})
	}
	if en := byEscaped["ok.txt"]; en.Class != "ordinary" || en.State != "applied" {
		t.Fatalf("ok.txt = %+v, want ordinary and applied", en)
	}
	if got := owner.file(id, "ok.txt"); got != "fine\n" {
		t.Fatalf("ok.txt = %q", got)
	}
	if cs.Status != "pending" {
		t.Fatalf("change set status = %s, want pending (the collisions wait for a person)", cs.Status)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestProviderRateLimitIsRetried: a 429 with Retry-After does not end the
// run: the gateway waits, tries again, and the retry is in the trace.
func TestProviderRateLimitIsRetried(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("patient")
	e.answer(modeltest.Sequence(modeltest.RateLimited("0"), modeltest.Text("done after a retry")))
	run := owner.send(id, "hello")
	done := owner.waitRun(run.ID, "completed", "errored")
	if done.Status != "completed" {
		t.Fatalf("run = %+v, want completed after the retry", done)
	}
	events := owner.trace(run.ID)
	verify(t, run.ID, events)
	if got := strings.Join(types(events), " "); !strings.Contains(got, "started retry usage message ended") {
		t.Fatalf("trace = %s, want a retry before the answer", got)
	}
	for _, ev := range events {
		if ev.Type == "retry" && (!strings.Contains(string(ev.Data), `"status":429`) || !strings.Contains(string(ev.Data), `"attempt":2`)) {
			t.Fatalf("retry event = %s", ev.Data)
		}
	}
}

// TestStopDuringRetryWait: a graceful stop while the gateway waits to try
// a rate-limited call again ends the wait at once: the run is cancelled and
// the model is not called again.
func TestStopDuringRetryWait(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("patient")
	e.answer(modeltest.Sequence(modeltest.RateLimited("25"), modeltest.Text("too late")))
	run := owner.send(id, "hello")
	owner.waitTrace(run.ID, "retry")
	owner.do("POST", "/api/runs/"+run.ID+"/stop", nil).want(http.StatusAccepted)
	done := owner.waitRun(run.ID, "cancelled", "completed", "errored")
	if done.Status != "cancelled" {
		t.Fatalf("run = %+v, want cancelled", done)
	}
	if n := len(e.model.Requests()); n != 1 {
		t.Fatalf("the model was called %d times, want 1: the stop must end the wait", n)
	}
}
