package store

import (
	"context"
	"slices"
	"testing"

	"corral"
)

// admitChild admits a delegated run of agent for parent's call, recording
// the facts decide saw.
func admitChild(t *testing.T, db *DB, agent corral.Agent, user corral.User, parent corral.Run, call string, seen *corral.AdmissionFacts) (corral.Run, error) {
	t.Helper()
	m, r, ev := admission(agent, user, "a task", 0)
	r.ParentRunID, r.RootRunID, r.Depth, r.ParentCall = parent.ID, parent.Root(), parent.Depth+1, call
	_, err := db.Admit(context.Background(), m, r, ev, func(f corral.AdmissionFacts) string {
		if seen != nil {
			*seen = f
		}
		return ""
	})
	r.Status = corral.RunAdmitted
	return r, err
}

func TestDelegationTree(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	alice := mustUser(t, db, "alice")
	parentAgent := mustAgent(t, db, alice, "parent", 0)
	kids := []corral.Agent{mustAgent(t, db, alice, "k1", 0), mustAgent(t, db, alice, "k2", 0), mustAgent(t, db, alice, "k3", 0)}
	root := mustAdmit(t, db, parentAgent, alice, 0)
	other := mustAdmit(t, db, kids[2], alice, 0) // another tree

	var facts corral.AdmissionFacts
	c1, err := admitChild(t, db, kids[0], alice, root, "m1-0", &facts)
	if err != nil {
		t.Fatal(err)
	}
	if facts.Children != 0 || facts.TreeActive != 0 {
		t.Errorf("first child's facts = %+v, want no children, nothing active", facts)
	}
	if _, err := admitChild(t, db, kids[1], alice, root, "m1-0", nil); corral.ErrorCode(err) != corral.ECONFLICT {
		t.Errorf("a second run for the same call: err %v, want ECONFLICT", err)
	}
	c2, err := admitChild(t, db, kids[1], alice, root, "m1-1", &facts)
	if err != nil {
		t.Fatal(err)
	}
	if facts.Children != 1 || facts.TreeActive != 1 {
		t.Errorf("second child's facts = %+v, want 1 child, 1 active", facts)
	}
	mustUpdateRun(t, db, c1, corral.RunCompleted, "", t0)
	grand, err := admitChild(t, db, kids[0], alice, c2, "m0-0", &facts)
	if err != nil {
		t.Fatal(err)
	}
	// c2 has no child yet; of the tree's delegated runs only c2 is active.
	if facts.Children != 0 || facts.TreeActive != 1 {
		t.Errorf("grandchild's facts = %+v, want 0 children, 1 active", facts)
	}

	got, err := db.ChildRun(ctx, root.ID, "m1-1")
	if err != nil || got.ID != c2.ID || got.Depth != 1 || got.RootRunID != root.ID || got.ParentCall != "m1-1" {
		t.Errorf("ChildRun = %+v, %v; want %s at depth 1 under %s", got, err, c2.ID, root.ID)
	}
	if _, err := db.ChildRun(ctx, root.ID, "m9-9"); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Errorf("ChildRun of a call that started nothing: %v, want ENOTFOUND", err)
	}
	if _, err := db.ChildRun(ctx, "", ""); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Errorf("ChildRun of no parent: %v, want ENOTFOUND (a root is nobody's child)", err)
	}
	if r, _ := db.Run(ctx, root.ID); r.RootRunID != "" || r.Root() != root.ID {
		t.Errorf("a root reads back with RootRunID %q, Root %q; want \"\" and its id", r.RootRunID, r.Root())
	}

	tree, err := db.TreeRuns(ctx, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range tree {
		ids = append(ids, r.ID)
	}
	if want := []string{root.ID, c1.ID, c2.ID, grand.ID}; !slices.Equal(ids, want) {
		t.Errorf("TreeRuns = %v, want %v (oldest first, the other tree's %s not in it)", ids, want, other.ID)
	}

	for _, u := range []struct {
		run string
		n   int64
	}{{root.ID, 10}, {c1.ID, 5}, {grand.ID, 2}, {other.ID, 100}} {
		addUsage(t, db, u.run, corral.Tokens{Input: u.n, Output: u.n})
	}
	if n, err := db.TreeTokens(ctx, root.ID); err != nil || n != 34 {
		t.Errorf("TreeTokens = %d, %v; want 34 (the other tree's 200 not counted)", n, err)
	}

	made := mustAgent(t, db, alice, "made", 0)
	made.ID, made.Name, made.CreatedByRun = corral.NewID("agt"), "made by c2", c2.ID
	if err := db.CreateAgent(ctx, made); err != nil {
		t.Fatal(err)
	}
	if a, err := db.Agent(ctx, made.ID, alice.ID); err != nil || a.CreatedByRun != c2.ID {
		t.Errorf("Agent.CreatedByRun = %q, %v; want %s", a.CreatedByRun, err, c2.ID)
	}
	if n, err := db.AgentsCreatedInTree(ctx, root.ID); err != nil || n != 1 {
		t.Errorf("AgentsCreatedInTree(root) = %d, %v; want 1", n, err)
	}
	if n, err := db.AgentsCreatedInTree(ctx, other.ID); err != nil || n != 0 {
		t.Errorf("AgentsCreatedInTree(other) = %d, %v; want 0", n, err)
	}
}
