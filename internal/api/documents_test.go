package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode"

	"corral"
	"corral/internal/api"
	"corral/internal/modeltest"
	"corral/internal/retrieval"
)

// deployGuide is a private document the tests ask about.
const deployGuide = `# Deploys

## Canary

Every release of ledger-api goes to the canary pool first. The canary stage
lasts 20 minutes; if the error rate stays under 0.5 percent, the deploy bot
promotes the release to the whole fleet.

## Rollback

To roll back a bad release run ` + "`deployctl rollback ledger-api`" + `, which
restores the previous build within two minutes.
`

func TestDocumentUploadRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	owner := e.signup("owner@example.com", "Owner")
	id := owner.createAgent("docs")
	owner.do("PATCH", "/api/agents/"+id, map[string]any{"policy": map[string]any{"exclude": []string{"private/**"}}}).want(http.StatusOK)
	tests := []struct {
		name, doc, body, code, says string
	}{
		{"agent instructions", "AGENTS.md", "# Rules\n\nAlways deploy on Fridays.", "invalid_input", "Corral never indexes AGENTS.md"},
		{"nested instructions", "docs/CLAUDE.md", "x", "invalid_input", "claude.md"},
		{"cursor rules", ".cursorrules", "x", "invalid_input", ".cursorrules"},
		{"corral's own", ".corral/prompt.md", "x", "invalid_input", ".corral"},
		{"a secret", "config/.env.local", "KEY=1", "invalid_input", ".env.*"},
		{"the repository", ".git/config", "x", "invalid_name", "names git's directory"},
		{"the agent's exclusion glob", "private/notes.md", "x", "invalid_input", "private/**"},
		{"a bad name", "../up.md", "x", "invalid_name", ""},
		{"no name", "", "x", "invalid_name", ""},
		{"empty", "empty.md", " \n\t", "invalid_content", "empty"},
		{"PDF", "paper.pdf", "%PDF-1.7\n...", "invalid_content", "PDF is not supported"},
		{"binary", "blob.txt", "a\x00b", "invalid_content", "not UTF-8 text"},
		{"not UTF-8", "latin1.txt", "caf\xe9", "invalid_content", "not UTF-8 text"},
		{"too large", "big.txt", strings.Repeat("word ", (4<<20)/5+1), "too_large", "at most 4194304 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := owner.do("POST", "/api/agents/"+id+"/documents?name="+urlQuery(tt.doc), tt.body)
			if res.code() != tt.code || !strings.Contains(string(res.body), tt.says) {
				t.Fatalf("upload %q = %d %s, want %s saying %q", tt.doc, res.status, res.body, tt.code, tt.says)
			}
		})
	}
	var l api.List[api.DocumentView]
	owner.do("GET", "/api/agents/"+id+"/documents", nil).want(http.StatusOK).decode(&l)
	if len(l.Items) != 0 {
		t.Fatalf("refused uploads were indexed: %+v", l.Items)
	}
}

func urlQuery(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", "#", "%23").Replace(s)
}

// TestDocumentsPrivateAndLibrary: an agent's search sees its own private
// documents and (its policy.library on) the library, never another
// agent's; a person's search of the same agent follows its grants, fresh.
func TestDocumentsPrivateAndLibrary(t *testing.T) {
	e := newEnv(t, envOptions{})
	admin := e.signup("admin@example.com", "Admin") // the first account
	alice := e.signup("alice@example.com", "Alice")
	bob := e.signup("bob@example.com", "Bob")
	mine := alice.createAgent("mine")
	alice.do("PATCH", "/api/agents/"+mine, map[string]any{"policy": map[string]any{"library": true}}).want(http.StatusOK)
	theirs := bob.createAgent("theirs")

	var doc api.DocumentView
	alice.do("POST", "/api/agents/"+mine+"/documents?name=deploys.md", deployGuide).want(http.StatusCreated).decode(&doc)
	if doc.Source != "private" || doc.Chunks < 2 || doc.Bytes != int64(len(deployGuide)) || doc.Author == nil || doc.Author.Name != "Alice" || !doc.CanDelete {
		t.Fatalf("uploaded = %+v", doc)
	}
	// Bob's agent has its own canary notes, with the same words.
	bob.do("POST", "/api/agents/"+theirs+"/documents?name=bob-canary.md",
		"# Canary\n\nBob's canary stage of ledger-api lasts 45 minutes before promotion.").want(http.StatusCreated)
	var lib api.DocumentView
	bob.do("POST", "/api/library/documents?name=glossary.md",
		"# Glossary\n\nA canary is a small pool that gets a release first. Promotion moves the release to the fleet.").want(http.StatusCreated).decode(&lib)

	search := func(c *client, agent, q string) (*response, api.RetrievalView) {
		var r api.RetrievalView
		res := c.do("POST", "/api/agents/"+agent+"/search", map[string]any{"query": q, "k": 10})
		if res.status == http.StatusOK {
			res.decode(&r)
		}
		return res, r
	}
	_, r := search(alice, mine, "how long does the canary stage last before ledger-api is promoted?")
	if !r.Answerable || len(r.Items) == 0 || r.Items[0].DocumentID != doc.ID || !strings.Contains(r.Items[0].Text, "20 minutes") || r.Ranker != "bm25" {
		t.Fatalf("search = %+v, want the deploy guide's canary passage first", r)
	}
	sawLibrary := false
	for _, it := range r.Items {
		if it.Source == "private" && it.DocumentID != doc.ID {
			t.Fatalf("another agent's private passage in Alice's search: %+v", it)
		}
		if strings.Contains(it.Text, "45 minutes") {
			t.Fatalf("Bob's private canary notes reached Alice's agent: %+v", it)
		}
		sawLibrary = sawLibrary || (it.Source == "library" && it.DocumentID == lib.ID)
	}
	if !sawLibrary {
		t.Fatalf("the library's glossary is not among %+v", r.Items)
	}

	// Bob sees nothing of Alice's agent until she shares it, and again
	// nothing once she revokes: the very next request.
	hidden, _ := search(bob, mine, "canary")
	missing, _ := search(bob, "agt_doesnotexist0000000000", "canary")
	if hidden.status != http.StatusNotFound || !bytes.Equal(hidden.body, missing.body) {
		t.Fatalf("a stranger's search = %d %s, want the not-found of a missing agent %s", hidden.status, hidden.body, missing.body)
	}
	alice.grant(mine, bob.user.ID, "viewer")
	if res, r := search(bob, mine, "canary stage"); res.status != http.StatusOK || len(r.Items) == 0 {
		t.Fatalf("a viewer's search = %d %s", res.status, res.body)
	}
	bob.do("POST", "/api/agents/"+mine+"/documents?name=x.md", "x").want(http.StatusForbidden)
	bob.do("DELETE", "/api/agents/"+mine+"/documents/"+doc.ID, nil).want(http.StatusForbidden)
	alice.do("DELETE", "/api/agents/"+mine+"/grants/"+bob.user.ID, nil).want(http.StatusNoContent)
	if res, _ := search(bob, mine, "canary stage"); res.status != http.StatusNotFound {
		t.Fatalf("a revoked viewer's search = %d %s", res.status, res.body)
	}

	// The library: Alice may not delete Bob's document; Bob may.
	var ll api.List[api.DocumentView]
	alice.do("GET", "/api/library/documents", nil).want(http.StatusOK).decode(&ll)
	if len(ll.Items) != 1 || ll.Items[0].CanDelete {
		t.Fatalf("Alice's library = %+v, want Bob's glossary she cannot delete", ll.Items)
	}
	alice.do("DELETE", "/api/library/documents/"+lib.ID, nil).want(http.StatusForbidden)
	bob.do("DELETE", "/api/library/documents/"+lib.ID, nil).want(http.StatusNoContent)
	bob.do("DELETE", "/api/library/documents/"+lib.ID, nil).want(http.StatusNotFound)
	// An admin may delete anyone's.
	var other api.DocumentView
	alice.do("POST", "/api/library/documents?name=alice.md", "# Mine\n\nAlice's notes.").want(http.StatusCreated).decode(&other)
	admin.do("DELETE", "/api/library/documents/"+other.ID, nil).want(http.StatusNoContent)

	// A question the documents do not answer: the person sees the weak
	// passages, marked not answerable.
	_, weak := search(alice, mine, "what is the parental leave policy for contractors in Lisbon?")
	if weak.Answerable || weak.Confidence >= retrieval.Threshold {
		t.Fatalf("an unanswerable question = %+v", weak)
	}

	// Deleting the document, then the agent, leaves nothing behind.
	alice.do("DELETE", "/api/agents/"+mine+"/documents/"+doc.ID, nil).want(http.StatusNoContent)
	if _, r := search(alice, mine, "canary stage ledger-api"); len(r.Items) != 0 && r.Items[0].DocumentID == doc.ID {
		t.Fatalf("a deleted document was found: %+v", r)
	}
	alice.do("POST", "/api/agents/"+mine+"/documents?name=again.md", deployGuide).want(http.StatusCreated)
	alice.do("DELETE", "/api/agents/"+mine, nil).want(http.StatusNoContent)
	if _, err := e.docs.Search(context.Background(), corral.User{ID: alice.user.ID}, mine, "canary", 5); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("search of a deleted agent: %v", err)
	}
	e.assertNoSecrets(t)
}

// TestRunRetrievesDocuments: the message that starts a run is searched,
// what is found reaches the model (the thread keeps the message as
// written), the search_documents tool answers from the same stores, the
// trace records what was retrieved, and the answer names its sources.
// Another agent's private passages and the platform's scaffolding reach
// none of it.
func TestRunRetrievesDocuments(t *testing.T) {
	needSandbox(t)
	e := newEnv(t, envOptions{})
	alice := e.signup("alice@example.com", "Alice")
	bob := e.signup("bob@example.com", "Bob")
	id := alice.createAgent("ops")
	theirs := bob.createAgent("theirs")
	var doc api.DocumentView
	alice.do("POST", "/api/agents/"+id+"/documents?name=deploys.md", deployGuide).want(http.StatusCreated).decode(&doc)
	bob.do("POST", "/api/agents/"+theirs+"/documents?name=bob-canary.md",
		"# Canary\n\nBOB-PRIVATE-MARKER: the canary stage of ledger-api lasts 45 minutes before promotion.").want(http.StatusCreated)
	// Scaffolding: an instruction file and Corral's own directory in the
	// workspace (never indexed: retrieval reads only uploaded documents),
	// and an AGENTS.md planted straight into the agent's store, as an index
	// made before the rule would hold it: filtered out of every answer.
	alice.do("PUT", "/api/agents/"+id+"/files?path=AGENTS.md", "SCAFFOLD-MARKER: the canary stage lasts forever").want(http.StatusOK)
	e.plant(t, id, "AGENTS.md", "# Canary\n\nSCAFFOLD-MARKER: the canary stage of ledger-api lasts before promotion, always.")
	e.plant(t, id, ".corral/system-prompt.md", "# Canary\n\nSCAFFOLD-MARKER: the canary stage of ledger-api lasts before promotion.")

	e.answer(modeltest.Sequence(
		modeltest.Calls(modeltest.ToolCall{ID: "s1", Name: "search_documents", Arguments: `{"query": "command to roll back a bad ledger-api release"}`}),
		modeltest.Text("The canary stage lasts 20 minutes [1]."),
	))
	question := "How long does the canary stage of ledger-api last before promotion?"
	run := alice.send(id, question)
	if done := alice.waitRun(run.ID, "completed", "errored"); done.Status != "completed" {
		t.Fatalf("run = %+v", done)
	}

	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	prompt := reqs[0].Last().Content
	if !strings.HasPrefix(prompt, question+"\n\n") || !strings.Contains(prompt, "lasts 20 minutes") || !strings.Contains(prompt, "deploys.md") {
		t.Fatalf("the model's first user turn = %q, want the question then the deploy guide's passage", prompt)
	}
	var msgs api.List[api.MessageView]
	alice.do("GET", "/api/agents/"+id+"/messages", nil).want(http.StatusOK).decode(&msgs)
	if len(msgs.Items) != 2 || msgs.Items[0].Content != question {
		t.Fatalf("thread = %+v, want the question as written", msgs.Items)
	}
	answer := msgs.Items[1]
	if len(answer.Sources) == 0 || answer.Sources[0].DocumentID != doc.ID || answer.Sources[0].Name != "deploys.md" || answer.Sources[0].Confidence < retrieval.Threshold {
		t.Fatalf("the answer's sources = %+v", answer.Sources)
	}
	results := e.toolResults()
	if len(results) != 1 || !strings.Contains(results[0], "deployctl rollback ledger-api") {
		t.Fatalf("search_documents answered %q", results)
	}

	events := alice.trace(run.ID)
	verify(t, run.ID, events)
	var retrieved []map[string]any
	for _, ev := range events {
		if ev.Type == "retrieved" {
			var d map[string]any
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			retrieved = append(retrieved, d)
		}
	}
	if len(retrieved) != 2 || retrieved[0]["tool_call_id"] != nil || retrieved[1]["tool_call_id"] != "s1" || retrieved[0]["answerable"] != true {
		t.Fatalf("retrieved events = %+v, want the message's and the tool's", retrieved)
	}
	items, _ := retrieved[0]["items"].([]any)
	first, _ := items[0].(map[string]any)
	if first["document_id"] != doc.ID || first["chunk_id"] == "" || first["score"] == nil {
		t.Fatalf("the message's retrieval = %+v", retrieved[0])
	}

	// Nothing of Bob's, nothing of the scaffolding, anywhere the agent or
	// a person looks.
	var search api.RetrievalView
	alice.do("POST", "/api/agents/"+id+"/search", map[string]any{"query": "canary stage ledger-api lasts promotion always forever", "k": 20}).want(http.StatusOK).decode(&search)
	seen := []string{prompt, strings.Join(results, "\n"), answer.Content}
	for _, it := range search.Items {
		seen = append(seen, it.Name+" "+it.Text)
	}
	for _, ev := range events {
		seen = append(seen, string(ev.Data))
	}
	for _, r := range reqs {
		seen = append(seen, string(r.Body))
	}
	for _, s := range seen {
		for _, marker := range []string{"BOB-PRIVATE-MARKER", "SCAFFOLD-MARKER", "AGENTS.md", ".corral/"} {
			if strings.Contains(s, marker) {
				t.Fatalf("%q reached the agent or the person: %.300s", marker, s)
			}
		}
	}
	e.assertNoSecrets(t)
}

// plant adds a document straight into an agent's private store, past the
// upload's checks, as an index made before a rule existed would hold it.
func (e *env) plant(t *testing.T, agentID, name, text string) {
	t.Helper()
	x, err := e.stores.Private(context.Background(), agentID)
	if err != nil {
		t.Fatal(err)
	}
	d := corral.Document{ID: corral.NewID("doc"), Name: name, Bytes: int64(len(text)), CreatedAt: time.Now()}
	if err := x.Add(context.Background(), d, retrieval.Split(name, text), nil); err != nil {
		t.Fatal(err)
	}
}

// TestDocumentsEmbeddings: with an embedding model, documents get vectors
// through the gateway (metered on the agent), searches fuse BM25 with
// them, and when the provider's embeddings fail a search still answers by
// BM25 alone and says so, and an upload is still indexed.
func TestDocumentsEmbeddings(t *testing.T) {
	e := newEnv(t, envOptions{embedModel: "test-embed"})
	alice := e.signup("alice@example.com", "Alice")
	id := alice.createAgent("ops")
	embedCalls := func() (n int, words int) {
		for _, r := range e.model.Requests() {
			if r.Embeddings != nil {
				n++
				for _, in := range r.Embeddings {
					// The fake's usage: its words, runs of letters and digits.
					words += len(strings.FieldsFunc(in, func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) }))
				}
			}
		}
		return n, words
	}

	var doc api.DocumentView
	alice.do("POST", "/api/agents/"+id+"/documents?name=deploys.md", deployGuide).want(http.StatusCreated).decode(&doc)
	calls, tokens := embedCalls()
	if !doc.Embedded || calls != 1 || tokens == 0 {
		t.Fatalf("upload = %+v after %d embeddings calls, want embedded in one", doc, calls)
	}
	var agent api.AgentView
	alice.do("GET", "/api/agents/"+id, nil).want(http.StatusOK).decode(&agent)
	if agent.Budget.Used != int64(tokens) {
		t.Fatalf("budget used = %d, want the %d tokens the provider reported for the embeddings", agent.Budget.Used, tokens)
	}

	var r api.RetrievalView
	alice.do("POST", "/api/agents/"+id+"/search", map[string]any{"query": "how do I roll back a bad release?"}).want(http.StatusOK).decode(&r)
	if r.Ranker != "fused" || r.Note != "" || len(r.Items) == 0 || r.Items[0].DocumentID != doc.ID {
		t.Fatalf("search = %+v, want fused, the deploy guide first", r)
	}
	if n, _ := embedCalls(); n != 2 {
		t.Fatalf("%d embeddings calls, want 2 (the upload's and the query's)", n)
	}

	e.model.FailEmbeddings(http.StatusServiceUnavailable)
	alice.do("POST", "/api/agents/"+id+"/search", map[string]any{"query": "how do I roll back a bad release?"}).want(http.StatusOK).decode(&r)
	if r.Ranker != "bm25" || !strings.Contains(r.Note, "embeddings were not used") || len(r.Items) == 0 || r.Items[0].DocumentID != doc.ID {
		t.Fatalf("search with embeddings failing = %+v, want BM25 alone with a note", r)
	}
	var plain api.DocumentView
	alice.do("POST", "/api/agents/"+id+"/documents?name=later.md", "# Later\n\nWritten while the embedder was down.").want(http.StatusCreated).decode(&plain)
	if plain.Embedded {
		t.Fatalf("upload while embeddings fail = %+v, want indexed without vectors", plain)
	}
	e.model.FailEmbeddings(0)
	e.assertNoSecrets(t)
}

// TestDocumentsReplaceByName: uploading a document of a name the agent
// has replaces it (in one transaction: a search finds the old version or
// the new one); in the library it replaces only the caller's own.
func TestDocumentsReplaceByName(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.signup("admin@example.com", "Admin")
	alice, bob := e.signup("alice@example.com", "Alice"), e.signup("bob@example.com", "Bob")
	id := alice.createAgent("ops")
	alice.do("POST", "/api/agents/"+id+"/documents?name=deploys.md", "# Canary\n\nThe canary stage lasts 20 minutes.").want(http.StatusCreated)
	var v2 api.DocumentView
	alice.do("POST", "/api/agents/"+id+"/documents?name=deploys.md", "# Canary\n\nThe canary stage lasts 35 minutes now.").want(http.StatusCreated).decode(&v2)
	var l api.List[api.DocumentView]
	alice.do("GET", "/api/agents/"+id+"/documents", nil).want(http.StatusOK).decode(&l)
	if len(l.Items) != 1 || l.Items[0].ID != v2.ID {
		t.Fatalf("documents = %+v, want only the new deploys.md", l.Items)
	}
	var r api.RetrievalView
	alice.do("POST", "/api/agents/"+id+"/search", map[string]any{"query": "how long does the canary stage last?"}).want(http.StatusOK).decode(&r)
	for _, it := range r.Items {
		if strings.Contains(it.Text, "20 minutes") {
			t.Fatalf("the replaced version was found: %+v", it)
		}
	}
	if len(r.Items) == 0 || !strings.Contains(r.Items[0].Text, "35 minutes") {
		t.Fatalf("search = %+v, want the new version", r)
	}

	bob.do("POST", "/api/library/documents?name=glossary.md", "# Glossary\n\nBob's words.").want(http.StatusCreated)
	alice.do("POST", "/api/library/documents?name=glossary.md", "# Glossary\n\nAlice's words.").want(http.StatusCreated)
	bob.do("POST", "/api/library/documents?name=glossary.md", "# Glossary\n\nBob's new words.").want(http.StatusCreated)
	alice.do("GET", "/api/library/documents", nil).want(http.StatusOK).decode(&l)
	var authors []string
	for _, d := range l.Items {
		authors = append(authors, d.Author.Name)
	}
	if len(l.Items) != 2 || strings.Join(authors, ",") != "Bob,Alice" {
		t.Fatalf("library = %+v, want Bob's new glossary and Alice's, not Bob's first", l.Items)
	}
}
