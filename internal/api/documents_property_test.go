package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/api"
)

// TestDocumentIsolationProperty walks thousands of random operations over
// random users, agents, grants, private and library documents: searches
// by a person (which return even the weak passages, so every candidate a
// store yields is checked) and by a run (the path of the search_documents
// tool and of what is retrieved for a run's message), interleaved with
// grants given, changed and revoked. It holds, against a model of who
// may see what kept by the test itself:
//
//   - a search of agent A returns private passages of A's documents only,
//     and library passages of library documents only, and those only when
//     A's policy.library is on;
//   - a caller without access to A is answered not found, for a person and
//     for a run alike, from the very next query after a revocation;
//   - a caller with access is answered.
func TestDocumentIsolationProperty(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(15, 2026))
	vocab := strings.Fields("canary deploy release rollback ledger invoice budget leave travel expense laptop " +
		"backup restore failover primary replica certificate rotate alert pager incident review garden tomato " +
		"compost telescope meeting kitchen oven recipe policy retention archive quota upload window linux")
	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = vocab[rng.IntN(len(vocab))]
		}
		return strings.Join(w, " ")
	}

	const nUsers, nAgents = 5, 6
	users := make([]*client, nUsers)
	for i := range users {
		users[i] = e.signup(fmt.Sprintf("user%d@example.com", i), fmt.Sprintf("User %d", i))
	}
	owner := make([]int, nAgents)
	agents := make([]string, nAgents)
	libraryOn := make([]bool, nAgents)          // a third of the agents do not search the library
	private := make([]map[string]bool, nAgents) // agent → its documents' ids
	var markers []string                        // a word only one document holds
	for a := range agents {
		owner[a] = rng.IntN(nUsers)
		agents[a] = users[owner[a]].createAgent(fmt.Sprintf("agent %d", a))
		libraryOn[a] = a%3 != 0
		users[owner[a]].do("PATCH", "/api/agents/"+agents[a], map[string]any{"policy": map[string]any{"library": libraryOn[a]}}).want(200)
		private[a] = map[string]bool{}
		for d := 0; d < 2; d++ {
			marker := fmt.Sprintf("marker%c%c", 'a'+a, 'a'+d)
			markers = append(markers, marker)
			text := fmt.Sprintf("# %s\n\n%s %s.\n\n%s", words(2), words(12), marker, words(20))
			var doc api.DocumentView
			users[owner[a]].do("POST", "/api/agents/"+agents[a]+"/documents?name=doc.md", text).want(201).decode(&doc)
			private[a][doc.ID] = true
		}
	}
	library := map[string]bool{}
	for d := 0; d < 4; d++ {
		marker := fmt.Sprintf("markerlib%c", 'a'+d)
		markers = append(markers, marker)
		var doc api.DocumentView
		users[rng.IntN(nUsers)].do("POST", "/api/library/documents?name=lib.md",
			fmt.Sprintf("# %s\n\n%s %s %s", words(2), words(10), marker, words(15))).want(201).decode(&doc)
		library[doc.ID] = true
	}

	// level[u][a] is the test's own model of the grants: 0 none, 1 viewer,
	// 2 runner, 3 editor; the owner always sees.
	level := make([][]int, nUsers)
	for u := range level {
		level[u] = make([]int, nAgents)
	}
	levels := []corral.Level{corral.LevelNone, corral.LevelViewer, corral.LevelRunner, corral.LevelEditor}
	sees := func(u, a int) bool { return u == owner[a] || level[u][a] > 0 }

	const cases = 4000
	var searched, refused, items, privateSeen, librarySeen, libraryOff int
	for i := 0; i < cases; i++ {
		u, a := rng.IntN(nUsers), rng.IntN(nAgents)
		if rng.IntN(8) == 0 && u != owner[a] {
			l := rng.IntN(len(levels))
			var err error
			if l == 0 {
				err = e.db.DeleteGrant(ctx, agents[a], users[u].user.ID, "")
				if corral.ErrorCode(err) == corral.ENOTFOUND {
					err = nil
				}
			} else {
				err = e.db.PutGrant(ctx, agents[a], users[u].user.ID, levels[l], time.Now(), "")
			}
			if err != nil {
				t.Fatalf("case %d: grant: %v", i, err)
			}
			level[u][a] = l
			continue
		}
		q := words(1 + rng.IntN(4))
		if rng.IntN(2) == 0 {
			q += " " + markers[rng.IntN(len(markers))]
		}
		actor := corral.User{ID: users[u].user.ID, Name: users[u].user.Name}
		var res corral.Retrieval
		var err error
		by := "person"
		if rng.IntN(2) == 0 {
			res, err = e.docs.Search(ctx, actor, agents[a], q, 20)
		} else {
			by = "run"
			if rng.IntN(20) == 0 {
				// A run's message may be far longer than a query: its
				// beginning is searched, never refused.
				q = strings.Repeat(words(8)+" ", 200) + q
			}
			run := corral.Run{ID: corral.NewID("run"), AgentID: agents[a], TriggeredBy: &corral.UserRef{ID: actor.ID}}
			res, err = e.docs.Retrieve(ctx, run, q, 20, noMeter{})
		}
		if !sees(u, a) {
			if corral.ErrorCode(err) != corral.ENOTFOUND {
				t.Fatalf("case %d: a %s search by user %d of agent %d, which they may not see: %v, %+v", i, by, u, a, err, res)
			}
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("case %d: a %s search by user %d of agent %d (level %d): %v", i, by, u, a, level[u][a], err)
		}
		searched++
		if !libraryOn[a] {
			libraryOff++
		}
		for _, it := range res.Items {
			items++
			switch {
			case it.Source == corral.SourcePrivate && private[a][it.DocumentID]:
				privateSeen++
			case it.Source == corral.SourceLibrary && library[it.DocumentID] && libraryOn[a]:
				librarySeen++
			default:
				t.Fatalf("case %d: a %s search of agent %d for %q returned %s passage %s of document %s, which is not its own",
					i, by, a, q, it.Source, it.ChunkID, it.DocumentID)
			}
		}
	}
	t.Logf("%d cases: %d searches answered (%d without the library), %d refused, %d passages checked (%d private, %d library)",
		cases, searched, libraryOff, refused, items, privateSeen, librarySeen)
	// The walk must have exercised each side, or it proves nothing.
	if refused < 100 || searched < 500 || libraryOff < 100 || privateSeen < 500 || librarySeen < 100 {
		t.Fatalf("the walk is too thin: %d refused, %d searched (%d without the library), %d private and %d library passages",
			refused, searched, libraryOff, privateSeen, librarySeen)
	}
}

// noMeter meters nothing: these searches make no model call.
type noMeter struct{}

func (noMeter) Reserve(context.Context, string, int64) (corral.Settle, error) {
	return func(context.Context, corral.Tokens, bool) error { return nil }, nil
}
