// Package nodetest is one conformance suite for every implementation of
// corral.Trees and corral.Sessions: node.Local on this machine, noderpc's
// Client reaching one over a relay, and fleet's Router routing to one
// through control. Each implementation's tests call Run with a way to make
// a fresh Subject, and all pass the same cases: what each method answers,
// what it leaves behind, and its error codes. Where an implementation
// legitimately differs, its Subject says so (Caps) and the suite checks
// that difference instead of skipping.
//
// Cases that need a kernel feature (the sandbox, overlayfs or a copy for a
// staged tree) skip with kerneltest's conventions where it is missing.
package nodetest

import (
	"context"
	"testing"

	"corral"
)

// Subject is one implementation under test, over a node of its own.
type Subject struct {
	Trees    corral.Trees
	Sessions corral.Sessions
	// Tree is where a staged tree's files are on this machine: the suite
	// writes there what a run would write from inside its sandbox.
	Tree func(stageID string) string
	Caps Caps
}

// Caps are where an implementation legitimately differs from node.Local.
type Caps struct {
	// ReplaysAccess: the calls cross to a sandbox node that replays the
	// access decision (noderpc): one that acts in a sandbox (StartSession,
	// Exec, Terminal) made for nobody, or for a person whose level does not
	// allow it, is refused EFORBIDDEN before the node is asked. On the
	// machine itself the services decided already, and the node takes the
	// call as it comes.
	ReplaysAccess bool
}

// Run runs the suite: each case on a subject newSubject makes for it,
// configured as setup says.
func Run(t *testing.T, newSubject func(t *testing.T, setup Setup) Subject) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newSubject) })
	}
}

// NewSubject makes a subject for a case.
type NewSubject = func(t *testing.T, setup Setup) Subject

var cases = []struct {
	name string
	run  func(t *testing.T, newSubject NewSubject)
}{
	{"Files", testFiles},
	{"Import", testImport},
	{"Archive", testArchive},
	{"Delete", testDelete},
	{"StageManifestApply", testStageManifestApply},
	{"ApplyConflict", testApplyConflict},
	{"NoStage", testNoStage},
	{"DropAgent", testDropAgent},
	{"MoveWorkspace", testMoveWorkspace},
	{"Git", testGit},
	{"NoSession", testNoSession},
	{"Access", testAccess},
	{"Session", testSession},
	{"OutputCancelled", testOutputCancelled},
	{"Terminal", testTerminal},
}

// acting is the context of the suite's calls: made for an editor of the
// agent, as the services make them.
var acting = corral.WithActor(context.Background(), corral.Actor{UserID: "usr_suite", AgentID: "agt_suite", Level: corral.LevelEditor})

// wantCode fails t unless err has the code want ("" for no error).
func wantCode(t *testing.T, what string, err error, want string) {
	t.Helper()
	if got := corral.ErrorCode(err); got != want {
		if want == "" {
			want = "no error"
		}
		t.Fatalf("%s = %v (%s), want %s", what, err, got, want)
	}
}
