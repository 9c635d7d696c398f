//go:build linux

package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/api"
	"corral/internal/modeltest"
	"corral/internal/service"
)

// proposer answers a message by proposing a file: 4 MiB of noise when
// the message asks for something large, a line otherwise.
func proposer(r modeltest.Request) modeltest.Reply {
	last := r.Last()
	switch {
	case last.Role != "user":
		return modeltest.Text("proposed")
	case strings.Contains(last.Content, "large"):
		return modeltest.Calls(modeltest.ShellCall("c1", "head -c 4194304 /dev/urandom > big.bin"))
	}
	return modeltest.Calls(modeltest.WriteCall("c1", "notes.txt", "a proposal\n"))
}

// The attack: three agents of one person whose change sets wait hold more
// of the server's disk than each agent's own bound would ever notice. The
// person's next message is refused with pending_disk_user, naming the
// largest sets; another person is not held by them; a person granted the
// agent is told whom to ask, not shown the owner's other agents. Rejecting
// the largest frees it.
func TestPendingDiskPerPerson(t *testing.T) {
	needDisk(t)
	const perUser = 2 << 20 // a stage takes some 100 KiB of disk even empty
	e := newEnv(t, envOptions{pendingDisk: service.PendingDiskBounds{PerUser: perUser}})
	owner := e.signup("owner@example.com", "Owner")
	bob := e.signup("bob@example.com", "Bob")
	e.answer(proposer)

	ids := map[string]string{}     // agent name → id
	changes := map[string]string{} // agent name → its pending change set
	for _, name := range []string{"one", "two", "three"} {
		ids[name] = owner.createAgent(name)
		ask := "propose something small"
		if name == "three" {
			ask = "propose something large"
		}
		run := owner.waitRun(owner.send(ids[name], ask).ID, "completed", "errored")
		if run.Status != "completed" || run.ChangeSetID == nil {
			t.Fatalf("run of %s = %+v, want completed with a change set", name, run)
		}
		changes[name] = *run.ChangeSetID
	}

	// The inbox shows what each holds.
	var inbox api.List[api.WaitingView]
	owner.do("GET", "/api/changes?status=pending", nil).want(http.StatusOK).decode(&inbox)
	held := map[string]int64{}
	var sum int64
	for _, w := range inbox.Items {
		held[w.AgentName] = w.DiskBytes
		sum += w.DiskBytes
	}
	if len(held) != 3 || held["one"] <= 0 || held["two"] <= 0 || held["three"] < 4<<20 || held["one"]+held["two"] >= perUser {
		t.Fatalf("inbox disk bytes = %v; want three sets, the large one over 4 MiB, the other two under %d together", held, perUser)
	}

	// The next message, to an agent whose own sets are small, is refused.
	calls := len(e.model.Requests())
	res := owner.do("POST", "/api/agents/"+ids["one"]+"/messages", map[string]string{"content": "and another"}).want(http.StatusUnprocessableEntity)
	var body api.ErrorBody
	res.decode(&body)
	msg := body.Error.Message
	if body.Error.Code != "admission_denied" || body.Error.Reason != "pending_disk_user" {
		t.Fatalf("refusal = %s, want admission_denied pending_disk_user", res.body)
	}
	for _, want := range []string{"--pending-disk-per-user", "2.0 MiB", changes["three"] + " (agent three, ", changes["one"], changes["two"]} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if i, j := strings.Index(msg, changes["three"]), strings.Index(msg, changes["one"]); i < 0 || j < i {
		t.Errorf("refusal %q does not name the largest set first", msg)
	}
	if n := len(e.model.Requests()); n != calls {
		t.Errorf("a refused message made %d model calls", n-calls)
	}
	var owned, server int64
	if err := e.rawDB(t).QueryRow(`SELECT owner_pending_disk_bytes, server_pending_disk_bytes FROM admissions
		WHERE reason = 'pending_disk_user'`).Scan(&owned, &server); err != nil || owned != sum || server != sum {
		t.Errorf("the refusal's evidence holds %d for the owner, %d for the server, %v; want %d each", owned, server, err, sum)
	}

	// Someone else granted the agent hears whom to ask, and nothing of the
	// owner's other agents.
	owner.grant(ids["one"], bob.user.ID, "runner")
	res = bob.do("POST", "/api/agents/"+ids["one"]+"/messages", map[string]string{"content": "from bob"}).want(http.StatusUnprocessableEntity)
	res.decode(&body)
	if body.Error.Reason != "pending_disk_user" || !strings.Contains(body.Error.Message, "ask Owner") || strings.Contains(body.Error.Message, changes["three"]) {
		t.Errorf("refusal to a runner = %s, want pending_disk_user naming the owner and no change set", res.body)
	}
	// Another person's agents are not held by the owner's sets.
	mine := bob.createAgent("bobs")
	bob.waitRun(bob.send(mine, "propose something small").ID, "completed")

	// Rejecting the largest frees it: the next message is admitted, and
	// its trace says what was held.
	owner.do("POST", "/api/changes/"+changes["three"]+"/reject", nil).want(http.StatusOK)
	run := owner.waitRun(owner.send(ids["one"], "and now").ID, "completed")
	var admitted struct {
		Owner  int64 `json:"owner_pending_disk_bytes"`
		Server int64 `json:"server_pending_disk_bytes"`
	}
	for _, ev := range owner.trace(run.ID) {
		if ev.Type == "admitted" {
			if err := json.Unmarshal(ev.Data, &admitted); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := held["one"] + held["two"]; admitted.Owner != want || admitted.Server <= want {
		t.Errorf("admitted trace holds %+v; want the owner's %d and the server's more (bob's set)", admitted, want)
	}
}

// The server's bound holds every person: once all the pending change sets
// together reach it, a person whose agents hold none is refused with
// pending_disk_server, and told that other people's sets must be decided;
// a person who holds some is shown theirs.
func TestPendingDiskServerBound(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{pendingDisk: service.PendingDiskBounds{Total: 1 << 20}})
	alice := e.signup("alice@example.com", "Alice")
	carol := e.signup("carol@example.com", "Carol")
	mine, theirs := alice.createAgent("mine"), carol.createAgent("theirs")
	// Sets as a run leaves them; their trees play no part in admission.
	pending := func(agentID string, bytes int64) string {
		t.Helper()
		cs := corral.ChangeSet{
			ID: corral.NewID("chg"), AgentID: agentID, Status: corral.ChangePending, Mode: corral.ChangesReview,
			CreatedAt: e.clock.Now(), ExpiresAt: e.clock.Now().Add(time.Hour), DiskBytes: bytes,
		}
		if err := e.db.CreateChangeSet(context.Background(), cs); err != nil {
			t.Fatal(err)
		}
		return cs.ID
	}
	big := pending(theirs, 1<<20)

	refusal := func(c *client, agentID string) api.ErrorView {
		t.Helper()
		var body api.ErrorBody
		c.do("POST", "/api/agents/"+agentID+"/messages", map[string]string{"content": "go"}).want(http.StatusUnprocessableEntity).decode(&body)
		if body.Error.Reason != "pending_disk_server" || !strings.Contains(body.Error.Message, "--pending-disk-total") ||
			!strings.Contains(body.Error.Message, "1.0 MiB held") {
			t.Fatalf("refusal = %+v, want pending_disk_server with its figures", body.Error)
		}
		return body.Error
	}
	if got := refusal(alice, mine); !strings.Contains(got.Message, "other people's change sets") || strings.Contains(got.Message, big) {
		t.Errorf("refusal to a person who holds nothing = %q", got.Message)
	}
	if got := refusal(carol, theirs); !strings.Contains(got.Message, big+" (agent theirs, 1.0 MiB)") {
		t.Errorf("refusal to the person who holds it = %q, want their set named", got.Message)
	}
}
