//go:build linux

package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"corral/internal/api"
	"corral/internal/kerneltest"
	"corral/internal/modeltest"
	"corral/internal/workspace"
)

// needDisk skips a test whose runs need a staged tree of their own
// filesystem where the machine cannot make one.
func needDisk(t *testing.T) {
	t.Helper()
	needSandbox(t)
	if err := workspace.DiskAvailable(); err != nil {
		kerneltest.Skip(t, "runs need their own filesystem: %v", err)
	}
}

// hostFree is the free space of the filesystem holding dir.
func hostFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

func TestDiskLimitsAreSettings(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("writer")
	var a api.AgentView
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"limits": map[string]int64{
		"disk_bytes": 16 << 20, "disk_inodes": 1000, "pending_disk_bytes": 1 << 30,
	}}).want(http.StatusOK).decode(&a)
	if a.Limits.DiskBytes != 16<<20 || a.Limits.DiskInodes != 1000 || a.Limits.PendingDiskBytes != 1<<30 {
		t.Fatalf("limits after PATCH = %+v", a.Limits)
	}
	owner.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&a)
	if a.Limits.DiskBytes != 16<<20 || a.Limits.DiskInodes != 1000 || a.Limits.PendingDiskBytes != 1<<30 {
		t.Fatalf("limits read back = %+v", a.Limits)
	}
	for _, bad := range []map[string]int64{
		{"disk_bytes": -1}, {"disk_bytes": 1<<40 + 1}, {"disk_inodes": 1<<24 + 1}, {"pending_disk_bytes": -5},
	} {
		res := owner.do("PATCH", "/api/agents/"+id, map[string]any{"limits": bad})
		if res.status != http.StatusBadRequest || res.code() != "invalid_input" {
			t.Errorf("PATCH limits %v = %d %s, want 400 invalid_input", bad, res.status, res.body)
		}
	}
}

// A run that writes past its disk limit is stopped by the kernel, ends
// errored with violation disk, and leaves the host's disk with no more
// than its limit used.
func TestRunPastItsDiskLimit(t *testing.T) {
	needDisk(t)
	const limit = 16 << 20
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("filler")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"limits": map[string]int64{"disk_bytes": limit}}).want(http.StatusOK)
	e.answer(modeltest.Sequence(
		modeltest.Calls(modeltest.ShellCall("c1", "dd if=/dev/zero of=big bs=1M count=64; echo dd said $?")),
		modeltest.Text("the disk was large enough"),
	))

	before := hostFree(t, e.dataDir)
	run := owner.send(id, "fill the disk")
	done := owner.waitRun(run.ID, "completed", "errored", "cancelled", "killed")
	after := hostFree(t, e.dataDir)
	if done.Status != "errored" || done.Violation == nil || *done.Violation != "disk" {
		t.Fatalf("run = %+v, want errored with violation disk", done)
	}
	// The host lost the run's limit at most, and some slack for the
	// filesystem's own blocks (and other writers on a shared machine): not
	// the 64 MiB dd asked for.
	used := before - after
	if used > limit+24<<20 {
		t.Errorf("the host's free space dropped by %d bytes for a run limited to %d", used, limit)
	}
	t.Logf("the host's free space dropped by %d bytes (limit %d)", used, limit)
	// dd itself met the kernel's refusal; the trace says which limit
	// ended the run.
	events := owner.trace(run.ID)
	verify(t, run.ID, events)
	var result struct {
		Violation string `json:"violation"`
		Output    string `json:"output"`
	}
	var limitHit string
	for _, ev := range events {
		switch ev.Type {
		case "tool_result":
			json.Unmarshal(ev.Data, &result)
		case "violation":
			var d struct {
				Limit string `json:"limit"`
			}
			json.Unmarshal(ev.Data, &d)
			limitHit = d.Limit
		}
	}
	if result.Violation != "disk" || !strings.Contains(result.Output, "No space left on device") || strings.Contains(result.Output, "dd said 0") {
		t.Errorf("tool result = %+v, want dd stopped by ENOSPC and the disk violation", result)
	}
	if limitHit != "disk" {
		t.Errorf("violation event names %q, want disk (trace: %s)", limitHit, strings.Join(types(events), " "))
	}
	// What it wrote, up to the limit, is a change set for review.
	if done.ChangeSetID == nil {
		t.Fatalf("run %+v has no change set", done)
	}
	var cs api.ChangeSetView
	owner.do("GET", "/api/changes/"+*done.ChangeSetID, nil).want(http.StatusOK).decode(&cs)
	if cs.Status != "pending" || len(cs.Entries) != 1 || cs.Entries[0].Path != "big" ||
		cs.Entries[0].Size < limit || cs.Entries[0].Size >= 64<<20 {
		t.Errorf("change set = %+v, want big, cut at the limit, pending", cs)
	}
}

// Pending change sets that hold the agent's pending_disk_bytes on disk
// refuse new runs with disk_quota, until a person decides them.
func TestPendingChangeSetsDiskQuota(t *testing.T) {
	needDisk(t)
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("proposer")
	// A stage's filesystem takes some 100 KiB of the host's disk even
	// empty: one pending change set is over 64 KiB.
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"limits": map[string]int64{"pending_disk_bytes": 64 << 10}}).want(http.StatusOK)
	e.answer(modeltest.Sequence(modeltest.Calls(modeltest.WriteCall("c1", "notes.txt", "a proposal\n")), modeltest.Text("proposed")))
	first := owner.waitRun(owner.send(id, "propose something").ID, "completed", "errored")
	if first.Status != "completed" || first.ChangeSetID == nil {
		t.Fatalf("first run = %+v, want completed with a change set", first)
	}
	calls := len(e.model.Requests())

	res := owner.do("POST", "/api/agents/"+id+"/messages", map[string]string{"content": "and another"}).want(http.StatusUnprocessableEntity)
	var body api.ErrorBody
	res.decode(&body)
	if body.Error.Code != "admission_denied" || body.Error.Reason != "disk_quota" || body.Error.Message == "" {
		t.Fatalf("refusal = %s, want admission_denied disk_quota", res.body)
	}
	if n := len(e.model.Requests()); n != calls {
		t.Errorf("a refused message made %d model calls", n-calls)
	}
	if got := e.admissionRows(t, id, "and another"); got["disk_quota"] != 1 {
		t.Errorf("evidence = %v, want one disk_quota refusal", got)
	}
	var held int64
	if err := e.rawDB(t).QueryRow(`SELECT pending_disk_bytes FROM admissions WHERE reason = 'disk_quota'`).Scan(&held); err != nil || held <= 64<<10 {
		t.Errorf("the refusal's evidence holds pending_disk_bytes %d, %v; want over %d", held, err, 64<<10)
	}

	// Deciding the change set gives its disk back.
	owner.do("POST", "/api/changes/"+*first.ChangeSetID+"/reject", nil).want(http.StatusOK)
	e.answer(modeltest.Sequence(modeltest.Text("nothing to write")))
	owner.waitRun(owner.send(id, "and now").ID, "completed")
}
