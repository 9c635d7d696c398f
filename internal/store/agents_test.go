package store

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral"
)

// mustAgent creates an agent of owner created at t0 plus offset.
func mustAgent(t *testing.T, db *DB, owner corral.User, name string, offset time.Duration) corral.Agent {
	t.Helper()
	a := mustAgentValue(owner, name)
	a.CreatedAt = t0.Add(offset)
	if err := db.CreateAgent(context.Background(), a); err != nil {
		t.Fatalf("CreateAgent(%s): %v", name, err)
	}
	a.UpdatedAt = a.CreatedAt
	a.Access = corral.LevelOwner
	a.Accepted = true // an owner's agent is always a delegation target
	return a
}

// mustAgentValue is a new agent of owner, not stored.
func mustAgentValue(owner corral.User, name string) corral.Agent {
	return corral.Agent{
		ID:     corral.NewID("agt"),
		Name:   name,
		Owner:  corral.UserRef{ID: owner.ID, Name: owner.Name},
		Policy: corral.Policy{FS: corral.DefaultFS, Changes: corral.DefaultChanges, Network: corral.NetworkNone},
		State:  corral.StateActive,
		// Access is not stored; a stray value must not matter.
		Access:    corral.LevelViewer,
		CreatedAt: t0,
	}
}

// mustLink creates a link on agent and has member join it.
func mustLink(t *testing.T, db *DB, agent corral.Agent, level corral.Level, member corral.User) corral.Link {
	t.Helper()
	ctx := context.Background()
	l := corral.Link{ID: corral.NewID("lnk"), AgentID: agent.ID, Level: level, CreatedBy: agent.Owner.ID, CreatedAt: t0}
	if err := db.CreateLink(ctx, l, []byte(l.ID+"-hash")); err != nil {
		t.Fatalf("CreateLink: %v", err)
	}
	if err := db.JoinLink(ctx, l.ID, member.ID, t0); err != nil {
		t.Fatalf("JoinLink: %v", err)
	}
	return l
}

func mustGrant(t *testing.T, db *DB, agent corral.Agent, user corral.User, level corral.Level) {
	t.Helper()
	if err := db.PutGrant(context.Background(), agent.ID, user.ID, level, t0, ""); err != nil {
		t.Fatalf("PutGrant(%v): %v", level, err)
	}
}

func TestAgentCRUD(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "first", 0)

	got, err := db.Agent(ctx, a.ID, owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Errorf("Agent = %+v\nwant    %+v", got, a)
	}

	a.Name = "renamed"
	a.Instructions = "be brief"
	a.Model = "small"
	a.Policy = corral.Policy{FS: corral.FSReadOnly, Changes: corral.ChangesAuto, Network: corral.NetworkNone, Library: true}
	a.Limits = corral.Limits{MaxPromptBytes: 1, MaxRuns: 2, RunTimeoutS: 3, CPUMillis: 4, MemoryBytes: 5, Pids: 6, OutputBytes: 7}
	a.Budget = corral.Budget{Tokens: 1000, Used: 10}
	a.State = corral.StatePaused
	a.UpdatedAt = t0.Add(time.Hour)
	a.Owner = corral.UserRef{ID: "usr_other", Name: "ignored"} // not settable
	if err := db.UpdateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Owner = corral.UserRef{ID: owner.ID, Name: owner.Name}
	a.Budget.Used = 0            // not settable: only metering counts usage
	a.State = corral.StateActive // not settable: only SetAgentState moves it
	if got, err = db.Agent(ctx, a.ID, owner.ID); err != nil || !reflect.DeepEqual(got, a) {
		t.Errorf("Agent after update = %+v, %v\nwant %+v", got, err, a)
	}

	// A zero UpdatedAt means now.
	a.UpdatedAt = time.Time{}
	if err := db.UpdateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, _ = db.Agent(ctx, a.ID, owner.ID); !got.UpdatedAt.Equal(t0.Truncate(time.Millisecond)) {
		t.Errorf("UpdatedAt = %v, want the clock's %v", got.UpdatedAt, t0)
	}

	errs := []struct {
		name string
		err  func() error
		code string
		kind string
	}{
		{"create same id", func() error { return db.CreateAgent(ctx, a) }, corral.ECONFLICT, ""},
		{"create for unknown owner", func() error {
			b := a
			b.ID = corral.NewID("agt")
			b.Owner.ID = "usr_nope"
			return db.CreateAgent(ctx, b)
		}, corral.ENOTFOUND, "user"},
		{"read unknown", func() error { _, err := db.Agent(ctx, "agt_nope", owner.ID); return err }, corral.ENOTFOUND, "agent"},
		{"update unknown", func() error {
			b := a
			b.ID = "agt_nope"
			return db.UpdateAgent(ctx, b)
		}, corral.ENOTFOUND, "agent"},
		{"delete unknown", func() error { return db.DeleteAgent(ctx, "agt_nope") }, corral.ENOTFOUND, "agent"},
	}
	for _, e := range errs {
		t.Run(e.name, func(t *testing.T) {
			err := e.err()
			if e.kind != "" {
				wantNotFound(t, err, e.kind)
				return
			}
			wantCode(t, err, e.code)
		})
	}
}

func TestAccess(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	other := mustAgent(t, db, owner, "other", 0) // for links of the wrong agent

	cases := []struct {
		name string
		// setup gives user some access to agent; gone is the level expected
		// after undo, when undo is set.
		setup func(t *testing.T, agent corral.Agent, user corral.User) (undo func() error)
		want  corral.Level
		gone  corral.Level
	}{
		{"stranger", nil, corral.LevelNone, 0},
		{"grant viewer", grant(db, corral.LevelViewer), corral.LevelViewer, corral.LevelNone},
		{"grant runner", grant(db, corral.LevelRunner), corral.LevelRunner, corral.LevelNone},
		{"grant editor", grant(db, corral.LevelEditor), corral.LevelEditor, corral.LevelNone},
		{"link viewer", link(db, corral.LevelViewer), corral.LevelViewer, corral.LevelNone},
		{"link runner", link(db, corral.LevelRunner), corral.LevelRunner, corral.LevelNone},
		{"grant viewer and link runner", func(t *testing.T, a corral.Agent, u corral.User) func() error {
			mustGrant(t, db, a, u, corral.LevelViewer)
			return link(db, corral.LevelRunner)(t, a, u)
		}, corral.LevelRunner, corral.LevelViewer},
		{"grant editor and link runner", func(t *testing.T, a corral.Agent, u corral.User) func() error {
			mustGrant(t, db, a, u, corral.LevelEditor)
			return link(db, corral.LevelRunner)(t, a, u)
		}, corral.LevelEditor, corral.LevelEditor},
		{"link viewer and link runner", func(t *testing.T, a corral.Agent, u corral.User) func() error {
			mustLink(t, db, a, corral.LevelViewer, u)
			return link(db, corral.LevelRunner)(t, a, u)
		}, corral.LevelRunner, corral.LevelViewer},
		{"grant downgraded", func(t *testing.T, a corral.Agent, u corral.User) func() error {
			mustGrant(t, db, a, u, corral.LevelEditor)
			mustGrant(t, db, a, u, corral.LevelViewer)
			return nil
		}, corral.LevelViewer, 0},
		{"link created but not joined", func(t *testing.T, a corral.Agent, u corral.User) func() error {
			l := corral.Link{ID: corral.NewID("lnk"), AgentID: a.ID, Level: corral.LevelRunner, CreatedBy: owner.ID}
			if err := db.CreateLink(ctx, l, []byte(l.ID)); err != nil {
				t.Fatal(err)
			}
			return nil
		}, corral.LevelNone, 0},
		{"link of another agent", func(t *testing.T, a corral.Agent, u corral.User) func() error {
			mustLink(t, db, other, corral.LevelRunner, u)
			return nil
		}, corral.LevelNone, 0},
		{"grant to someone else", func(t *testing.T, a corral.Agent, u corral.User) func() error {
			mustGrant(t, db, a, owner, corral.LevelEditor)
			return nil
		}, corral.LevelNone, 0},
		{"agent deleted", func(t *testing.T, a corral.Agent, u corral.User) func() error {
			mustGrant(t, db, a, u, corral.LevelEditor)
			return func() error { return db.DeleteAgent(ctx, a.ID) }
		}, corral.LevelEditor, -1},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			agent := mustAgent(t, db, owner, c.name, time.Duration(i+1)*time.Second)
			user := mustUser(t, db, "user")
			var undo func() error
			if c.setup != nil {
				undo = c.setup(t, agent, user)
			}
			checkAccess(t, db, agent, user, c.want)
			if got, err := db.Agent(ctx, agent.ID, owner.ID); err != nil || got.Access != corral.LevelOwner {
				t.Errorf("owner's Access = %v, %v; want owner", got.Access, err)
			}
			if undo == nil {
				return
			}
			if err := undo(); err != nil {
				t.Fatalf("undo: %v", err)
			}
			if c.gone < 0 {
				_, err := db.Agent(ctx, agent.ID, user.ID)
				wantNotFound(t, err, "agent")
				if list, _ := db.AgentsFor(ctx, user.ID); len(list) != 0 {
					t.Errorf("AgentsFor after delete = %+v, want none", list)
				}
				return
			}
			checkAccess(t, db, agent, user, c.gone)
		})
	}
}

// grant returns a setup that grants level and an undo that revokes it.
func grant(db *DB, level corral.Level) func(*testing.T, corral.Agent, corral.User) func() error {
	return func(t *testing.T, a corral.Agent, u corral.User) func() error {
		mustGrant(t, db, a, u, level)
		return func() error { return db.DeleteGrant(context.Background(), a.ID, u.ID, "") }
	}
}

// link returns a setup that has the user join a link of level and an undo
// that deletes the link.
func link(db *DB, level corral.Level) func(*testing.T, corral.Agent, corral.User) func() error {
	return func(t *testing.T, a corral.Agent, u corral.User) func() error {
		l := mustLink(t, db, a, level, u)
		return func() error { return db.DeleteLink(context.Background(), a.ID, l.ID, "") }
	}
}

// checkAccess checks user's access to agent through Agent and AgentsFor.
func checkAccess(t *testing.T, db *DB, agent corral.Agent, user corral.User, want corral.Level) {
	t.Helper()
	ctx := context.Background()
	got, err := db.Agent(ctx, agent.ID, user.ID)
	if err != nil {
		t.Fatalf("Agent: %v", err)
	}
	if got.Access != want {
		t.Errorf("Agent(...).Access = %v, want %v", got.Access, want)
	}
	list, err := db.AgentsFor(ctx, user.ID)
	if err != nil {
		t.Fatalf("AgentsFor: %v", err)
	}
	var listed []corral.Level
	for _, a := range list {
		if a.ID == agent.ID {
			listed = append(listed, a.Access)
		}
	}
	switch {
	case want == corral.LevelNone && len(listed) != 0:
		t.Errorf("AgentsFor lists the agent with %v, want it absent", listed)
	case want != corral.LevelNone && (len(listed) != 1 || listed[0] != want):
		t.Errorf("AgentsFor lists the agent with %v, want once with %v", listed, want)
	}
}

func TestAgentsFor(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	alice := mustUser(t, db, "alice")
	bob := mustUser(t, db, "bob")
	carol := mustUser(t, db, "carol")

	own := mustAgent(t, db, alice, "own", 0)
	granted := mustAgent(t, db, bob, "granted", time.Second)
	both := mustAgent(t, db, bob, "both", 2*time.Second)
	// Two agents created in the same millisecond: the id breaks the tie.
	tieA := mustAgent(t, db, bob, "tie-a", 3*time.Second)
	tieB := mustAgent(t, db, bob, "tie-b", 3*time.Second)
	mustAgent(t, db, bob, "not shared", 4*time.Second)

	mustGrant(t, db, granted, alice, corral.LevelViewer)
	mustGrant(t, db, both, alice, corral.LevelRunner)
	mustLink(t, db, both, corral.LevelViewer, alice)
	mustLink(t, db, both, corral.LevelRunner, alice)
	mustLink(t, db, tieA, corral.LevelViewer, alice)
	mustLink(t, db, tieB, corral.LevelViewer, alice)
	mustGrant(t, db, own, alice, corral.LevelViewer) // an owner's stray grant changes nothing

	first, second := tieA, tieB
	if first.ID < second.ID {
		first, second = second, first
	}
	want := []struct {
		id     string
		access corral.Level
	}{
		{first.ID, corral.LevelViewer},
		{second.ID, corral.LevelViewer},
		{both.ID, corral.LevelRunner},
		{granted.ID, corral.LevelViewer},
		{own.ID, corral.LevelOwner},
	}
	got, err := db.AgentsFor(ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("AgentsFor(alice) = %d agents, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].ID != w.id || got[i].Access != w.access {
			t.Errorf("AgentsFor(alice)[%d] = %s (%s) with %v, want %s with %v",
				i, got[i].ID, got[i].Name, got[i].Access, w.id, w.access)
		}
		if got[i].Owner.Name == "" {
			t.Errorf("AgentsFor(alice)[%d].Owner.Name is empty", i)
		}
	}

	if list, err := db.AgentsFor(ctx, carol.ID); err != nil || len(list) != 0 {
		t.Errorf("AgentsFor(carol) = %+v, %v; want none", list, err)
	}
}

func TestGrants(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	u1 := mustUser(t, db, "u1")
	u2 := mustUser(t, db, "u2")

	for _, l := range []corral.Level{corral.LevelNone, corral.LevelOwner, corral.Level(9), corral.Level(-1)} {
		t.Run(fmt.Sprintf("level %v", l), func(t *testing.T) {
			wantCode(t, db.PutGrant(ctx, a.ID, u1.ID, l, t0, ""), corral.EINVALID)
		})
	}
	wantNotFound(t, db.PutGrant(ctx, a.ID, "usr_nope", corral.LevelViewer, t0, ""), "user")
	wantNotFound(t, db.PutGrant(ctx, "agt_nope", u1.ID, corral.LevelViewer, t0, ""), "agent")

	if err := db.PutGrant(ctx, a.ID, u2.ID, corral.LevelRunner, t0.Add(time.Second), ""); err != nil {
		t.Fatal(err)
	}
	if err := db.PutGrant(ctx, a.ID, u1.ID, corral.LevelViewer, t0.Add(2*time.Second), ""); err != nil {
		t.Fatal(err)
	}
	// Changing the level keeps the grant's creation time.
	if err := db.PutGrant(ctx, a.ID, u2.ID, corral.LevelEditor, t0.Add(3*time.Second), ""); err != nil {
		t.Fatal(err)
	}
	got, err := db.Grants(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []corral.Grant{
		{AgentID: a.ID, User: corral.User{ID: u2.ID, Email: u2.Email, Name: u2.Name}, Level: corral.LevelEditor, CreatedAt: t0.Add(time.Second).Truncate(time.Millisecond)},
		{AgentID: a.ID, User: corral.User{ID: u1.ID, Email: u1.Email, Name: u1.Name}, Level: corral.LevelViewer, CreatedAt: t0.Add(2 * time.Second).Truncate(time.Millisecond)},
	}
	if len(got) != len(want) {
		t.Fatalf("Grants = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Grants[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}

	if err := db.DeleteGrant(ctx, a.ID, u1.ID, ""); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, db.DeleteGrant(ctx, a.ID, u1.ID, ""), "grant")
	if got, _ := db.Grants(ctx, a.ID); len(got) != 1 {
		t.Errorf("Grants after delete = %+v, want one", got)
	}
	if got, err := db.Grants(ctx, "agt_nope"); err != nil || len(got) != 0 {
		t.Errorf("Grants(unknown) = %+v, %v; want none", got, err)
	}
}

func TestLinks(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	member := mustUser(t, db, "member")
	a := mustAgent(t, db, owner, "a", 0)
	b := mustAgent(t, db, owner, "b", 0)

	newLink := func(agent corral.Agent, level corral.Level) corral.Link {
		return corral.Link{ID: corral.NewID("lnk"), AgentID: agent.ID, Level: level, CreatedBy: owner.ID, CreatedAt: t0}
	}
	for _, l := range []corral.Level{corral.LevelNone, corral.LevelEditor, corral.LevelOwner} {
		t.Run(fmt.Sprintf("level %v", l), func(t *testing.T) {
			wantCode(t, db.CreateLink(ctx, newLink(a, l), []byte("h")), corral.EINVALID)
		})
	}
	wantNotFound(t, db.CreateLink(ctx, newLink(corral.Agent{ID: "agt_nope"}, corral.LevelViewer), []byte("h")), "agent")
	bad := newLink(a, corral.LevelViewer)
	bad.CreatedBy = "usr_nope"
	wantNotFound(t, db.CreateLink(ctx, bad, []byte("h")), "user")

	l1 := newLink(a, corral.LevelViewer)
	if err := db.CreateLink(ctx, l1, []byte("hash-1")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.CreateLink(ctx, newLink(a, corral.LevelRunner), []byte("hash-1")), corral.ECONFLICT)
	l2 := newLink(a, corral.LevelRunner)
	l2.CreatedAt = t0.Add(time.Second)
	if err := db.CreateLink(ctx, l2, []byte("hash-2")); err != nil {
		t.Fatal(err)
	}
	lb := newLink(b, corral.LevelRunner)
	if err := db.CreateLink(ctx, lb, []byte("hash-b")); err != nil {
		t.Fatal(err)
	}

	l1.CreatedAt = l1.CreatedAt.Truncate(time.Millisecond)
	l2.CreatedAt = l2.CreatedAt.Truncate(time.Millisecond)
	if got, err := db.LinkByHash(ctx, []byte("hash-1")); err != nil || got != l1 {
		t.Errorf("LinkByHash = %+v, %v; want %+v", got, err, l1)
	}
	_, err := db.LinkByHash(ctx, []byte("hash-9"))
	wantNotFound(t, err, "link")
	if got, err := db.Links(ctx, a.ID); err != nil || len(got) != 2 || got[0] != l1 || got[1] != l2 {
		t.Errorf("Links = %+v, %v; want [%+v %+v]", got, err, l1, l2)
	}

	if err := db.JoinLink(ctx, l2.ID, member.ID, t0); err != nil {
		t.Fatal(err)
	}
	if err := db.JoinLink(ctx, l2.ID, member.ID, t0.Add(time.Hour)); err != nil {
		t.Errorf("joining twice: %v", err)
	}
	wantNotFound(t, db.JoinLink(ctx, "lnk_nope", member.ID, t0), "link")
	wantNotFound(t, db.JoinLink(ctx, l2.ID, "usr_nope", t0), "user")

	// A link is deleted only through its own agent.
	wantNotFound(t, db.DeleteLink(ctx, b.ID, l2.ID, ""), "link")
	checkAccess(t, db, a, member, corral.LevelRunner)
	if err := db.DeleteLink(ctx, a.ID, l2.ID, ""); err != nil {
		t.Fatal(err)
	}
	checkAccess(t, db, a, member, corral.LevelNone)
	wantNotFound(t, db.DeleteLink(ctx, a.ID, l2.ID, ""), "link")
	_, err = db.LinkByHash(ctx, []byte("hash-2"))
	wantNotFound(t, err, "link")
}

func TestDeleteAgentCascades(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	member := mustUser(t, db, "member")
	a := mustAgent(t, db, owner, "doomed", 0)
	keep := mustAgent(t, db, owner, "kept", 0)
	for _, agent := range []corral.Agent{a, keep} {
		mustGrant(t, db, agent, member, corral.LevelRunner)
		mustLink(t, db, agent, corral.LevelViewer, member)
		m := corral.Message{ID: corral.NewID("msg"), AgentID: agent.ID, Role: corral.RoleUser, Content: "hi", Author: &corral.UserRef{ID: member.ID}}
		if err := db.AddMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	if err := db.DeleteAgent(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	tables := []struct {
		table, where string
	}{
		{"agents", "id = ?"},
		{"grants", "agent_id = ?"},
		{"links", "agent_id = ?"},
		{"link_members", "link_id IN (SELECT id FROM links WHERE agent_id = ?)"},
		{"messages", "agent_id = ?"},
	}
	for _, tb := range tables {
		for _, c := range []struct {
			agent string
			want  int
		}{{a.ID, 0}, {keep.ID, 1}} {
			var n int
			q := `SELECT count(*) FROM ` + tb.table + ` WHERE ` + tb.where
			if err := db.queryRow(ctx, q, c.agent).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != c.want {
				t.Errorf("%s rows of %s = %d, want %d", tb.table, c.agent, n, c.want)
			}
		}
	}
	// The orphaned link_members rows are gone too, not just unreachable.
	var members int
	if err := db.queryRow(ctx, `SELECT count(*) FROM link_members`).Scan(&members); err != nil || members != 1 {
		t.Errorf("link_members rows = %d, %v; want 1", members, err)
	}
	wantNotFound(t, db.DeleteAgent(ctx, a.ID), "agent")
}

// TestNoPasswordHash checks that no read but Credential carries a password
// hash out of the store.
func TestNoPasswordHash(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	u := mustUser(t, db, "owner")
	g := mustUser(t, db, "grantee")
	a := mustAgent(t, db, u, "a", 0)
	mustGrant(t, db, a, g, corral.LevelEditor)
	if err := db.CreateSession(ctx, corral.Session{ID: corral.NewID("ses"), UserID: u.ID, TokenHash: []byte("s"), ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateToken(ctx, corral.APIToken{ID: corral.NewID("tok"), UserID: u.ID, Name: "t"}, []byte("t")); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateInvite(ctx, corral.Invite{ID: corral.NewID("inv"), CreatedBy: u.ID, ExpiresAt: t0.Add(time.Hour)}, []byte("i")); err != nil {
		t.Fatal(err)
	}

	reads := []struct {
		name string
		call func() (any, error)
	}{
		{"CreateUser", func() (any, error) {
			return db.CreateUser(ctx, corral.NewUser{Email: "c@example.com", Name: "c", PasswordHash: "$argon2id$fake"})
		}},
		{"CreateUserWithInvite", func() (any, error) {
			return db.CreateUserWithInvite(ctx, []byte("i"), t0, corral.NewUser{Email: "d@example.com", Name: "d", PasswordHash: "$argon2id$fake"})
		}},
		{"UserByID", func() (any, error) { return db.UserByID(ctx, u.ID) }},
		{"UserByEmail", func() (any, error) { return db.UserByEmail(ctx, u.Email) }},
		{"Users", func() (any, error) { return db.Users(ctx) }},
		{"SessionUser", func() (any, error) { return db.SessionUser(ctx, []byte("s"), t0) }},
		{"TokenUser", func() (any, error) { return db.TokenUser(ctx, []byte("t"), t0) }},
		{"Tokens", func() (any, error) { return db.Tokens(ctx, u.ID) }},
		{"Grants", func() (any, error) { return db.Grants(ctx, a.ID) }},
		{"Agent", func() (any, error) { return db.Agent(ctx, a.ID, g.ID) }},
		{"AgentsFor", func() (any, error) { return db.AgentsFor(ctx, g.ID) }},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			v, err := r.call()
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprintf("%+v", v); strings.Contains(s, "$argon2") {
				t.Errorf("%s returned a password hash: %s", r.name, s)
			}
		})
	}
}
