package retrieval

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral"
	"corral/internal/modeltest"
)

// The corpus of these tests: a few short documents, each answering its
// own kind of question.
const (
	leaveDoc = "# Leave\n\n## Parental leave\n\nNew parents get 16 weeks of parental leave, paid in full, to take within the first year.\n\n" +
		"## Sick leave\n\nEmployees have 10 days of paid sick leave per year; a doctor's note is needed from the third day.\n"
	expensesDoc = "# Expenses\n\nSubmit receipts within 30 days of the purchase. Meals on a trip are reimbursed up to 40 euros per day.\n"
	colorDoc    = "# Brand\n\nOur brand colors are teal and sand; logos sit on a white background with a clear margin.\n"
)

func openIndex(t *testing.T, path, owner string) *Index {
	t.Helper()
	x, err := Open(context.Background(), path, owner)
	if err != nil {
		t.Fatalf("Open(%s, %s): %v", path, owner, err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// embedChunk is the vector a chunk is stored with, computed as the
// service does (heading and text).
func embedChunk(c Chunk) []float32 { return modeltest.Embedding(c.Heading + "\n" + c.Text) }

// addDoc indexes text as document id named name, with a vector per chunk
// when vectors is set.
func addDoc(t *testing.T, x *Index, id, name, text string, vectors bool) {
	t.Helper()
	chunks := Split(name, text)
	var vecs [][]float32
	if vectors {
		for _, c := range chunks {
			vecs = append(vecs, embedChunk(c))
		}
	}
	d := corral.Document{ID: id, Name: name, Bytes: int64(len(text)), CreatedAt: time.Now()}
	if err := x.Add(context.Background(), d, chunks, vecs); err != nil {
		t.Fatalf("Add(%s): %v", id, err)
	}
}

// embedder is an Embedder over modeltest.Embedding, as the fake provider
// serves it.
func embedder(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, s := range texts {
		out[i] = modeltest.Embedding(s)
	}
	return out, nil
}

func search(t *testing.T, scopes []Scope, q Query) corral.Retrieval {
	t.Helper()
	r, err := Search(context.Background(), scopes, q)
	if err != nil {
		t.Fatalf("Search(%q): %v", q.Text, err)
	}
	return r
}

func docIDs(r corral.Retrieval) []string {
	var out []string
	for _, p := range r.Items {
		out = append(out, p.DocumentID)
	}
	return out
}

// TestSearchStoresKeptApart: two agents' stores holding the same words
// each answer only with their own documents, and a search over both
// names each passage's store.
func TestSearchStoresKeptApart(t *testing.T) {
	dir := t.TempDir()
	a := openIndex(t, filepath.Join(dir, "a", "documents.db"), "agt_a")
	b := openIndex(t, filepath.Join(dir, "b", "documents.db"), "agt_b")
	for _, x := range []struct {
		x      *Index
		prefix string
	}{{a, "a"}, {b, "b"}} {
		addDoc(t, x.x, "doc_"+x.prefix+"_leave", "leave.md", leaveDoc, true)
		addDoc(t, x.x, "doc_"+x.prefix+"_expenses", "expenses.md", expensesDoc, true)
	}
	queries := []string{"How many weeks of parental leave do new parents get?", "meals reimbursed per day", "sick leave doctor note"}
	for _, embed := range []Embedder{nil, embedder} {
		for _, qt := range queries {
			q := Query{Text: qt, K: MaxK, Weak: true, Embed: embed}
			for _, tc := range []struct {
				name   string
				scopes []Scope
				want   map[string]string // document id prefix → source
			}{
				{"a alone", []Scope{{a, corral.SourcePrivate}}, map[string]string{"doc_a_": corral.SourcePrivate}},
				{"b alone", []Scope{{b, corral.SourcePrivate}}, map[string]string{"doc_b_": corral.SourcePrivate}},
				{"a and b as library", []Scope{{a, corral.SourcePrivate}, {b, corral.SourceLibrary}},
					map[string]string{"doc_a_": corral.SourcePrivate, "doc_b_": corral.SourceLibrary}},
			} {
				t.Run(fmt.Sprintf("%s/%s/embed=%v", tc.name, qt, embed != nil), func(t *testing.T) {
					r := search(t, tc.scopes, q)
					if len(r.Items) == 0 {
						t.Fatalf("no passages")
					}
					seen := map[string]bool{}
					for _, p := range r.Items {
						src, ok := tc.want[p.DocumentID[:6]]
						if !ok {
							t.Fatalf("passage of %s (%s) came back from %s", p.DocumentID, p.Source, tc.name)
						}
						if p.Source != src {
							t.Errorf("passage of %s has source %q, want %q", p.DocumentID, p.Source, src)
						}
						if !strings.HasPrefix(p.ChunkID, p.DocumentID+":") {
							t.Errorf("passage of %s has chunk id %q", p.DocumentID, p.ChunkID)
						}
						seen[p.DocumentID[:6]] = true
					}
					if len(seen) != len(tc.want) {
						t.Errorf("passages came from %v, want every one of %v", seen, tc.want)
					}
				})
			}
		}
	}
}

// TestSearchOwnerBound: even two owners in one file (never so in Corral:
// each store is a file of its own) see only their own rows, since every
// query is bound to the owner too.
func TestSearchOwnerBound(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "documents.db")
	a := openIndex(t, path, "agt_a")
	addDoc(t, a, "doc_a", "leave.md", leaveDoc, true)
	b := openIndex(t, path, "agt_b")
	addDoc(t, b, "doc_b", "expenses.md", expensesDoc, true)

	for _, embed := range []Embedder{nil, embedder} {
		r := search(t, []Scope{{b, corral.SourcePrivate}}, Query{Text: "parental leave weeks", Weak: true, K: MaxK, Embed: embed})
		for _, p := range r.Items {
			if p.DocumentID != "doc_b" {
				t.Errorf("b's search (embed %v) found %s", embed != nil, p.DocumentID)
			}
		}
	}
	ds, err := b.Documents(ctx)
	if err != nil || len(ds) != 1 || ds[0].ID != "doc_b" {
		t.Errorf("b.Documents() = %v, %v; want doc_b alone", ds, err)
	}
	if _, err := b.Document(ctx, "doc_a"); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Errorf("b.Document(doc_a) = %v, want %s", err, corral.ENOTFOUND)
	}
	if err := b.Delete(ctx, "doc_a"); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Errorf("b.Delete(doc_a) = %v, want %s", err, corral.ENOTFOUND)
	}
	if _, err := a.Document(ctx, "doc_a"); err != nil {
		t.Errorf("a.Document(doc_a) after b's delete: %v", err)
	}
}

// TestSearchExcludesScaffolding: documents that were indexed although
// they are scaffolding (bypassing the service's check, as an older server
// or a glob added later would leave them) never come back, by either
// ranker, while an ordinary document with the same text does.
func TestSearchExcludesScaffolding(t *testing.T) {
	x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	text := "# Deploy\n\nTo deploy the billing service run make release, then confirm the canary in the dashboard.\n"
	names := map[string]string{
		"doc_agents":  "AGENTS.md",
		"doc_corral":  ".corral/prompt.md",
		"doc_policy":  "secret/deploy.md",
		"doc_claude":  "docs/CLAUDE.md",
		"doc_env":     "config/.env.production",
		"doc_visible": "deploy.md",
	}
	for id, name := range names {
		addDoc(t, x, id, name, text, true)
	}
	for _, tc := range []struct {
		name string
		q    Query
	}{
		{"bm25", Query{Text: "how do I deploy the billing service", Exclude: []string{"secret/**"}}},
		{"bm25 weak", Query{Text: "how do I deploy the billing service", Exclude: []string{"secret/**"}, Weak: true, K: MaxK}},
		{"fused", Query{Text: "how do I deploy the billing service", Exclude: []string{"secret/**"}, Embed: embedder}},
		{"fused weak", Query{Text: "deploying billing services canary", Exclude: []string{"secret/**"}, Embed: embedder, Weak: true, K: MaxK}},
		// Found by vector alone (no term in common): still excluded.
		{"vector only", Query{Text: "dashbord", Exclude: []string{"secret/**"}, Embed: embedder, Weak: true, K: MaxK}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := search(t, []Scope{{x, corral.SourcePrivate}}, tc.q)
			if len(r.Items) == 0 {
				t.Fatalf("no passages (confidence %v): the ordinary document should be found", r.Confidence)
			}
			for _, p := range r.Items {
				if p.DocumentID != "doc_visible" {
					t.Errorf("%s (%s) came back", p.DocumentID, p.Name)
				}
			}
		})
	}
	// Without the policy glob, the policy's document is an ordinary one.
	r := search(t, []Scope{{x, corral.SourcePrivate}}, Query{Text: "deploy billing service", Weak: true, K: MaxK})
	got := strings.Join(docIDs(r), " ")
	if !strings.Contains(got, "doc_policy") || strings.Contains(got, "doc_agents") || strings.Contains(got, "doc_corral") {
		t.Errorf("without the policy's glob the search found %s, want doc_policy and doc_visible only", got)
	}
}

// TestDelete: a deleted document is gone from search (by terms and by
// vector, the vectors having been loaded before) and from the list.
func TestDelete(t *testing.T) {
	ctx := context.Background()
	x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	addDoc(t, x, "doc_leave", "leave.md", leaveDoc, true)
	addDoc(t, x, "doc_expenses", "expenses.md", expensesDoc, true)
	q := Query{Text: "parental leave weeks", Weak: true, K: MaxK}
	fused := q
	fused.Embed = embedder
	// Load the vectors into memory first: the delete must reach them.
	if r := search(t, []Scope{{x, corral.SourcePrivate}}, fused); !strings.Contains(strings.Join(docIDs(r), " "), "doc_leave") {
		t.Fatalf("before the delete the search found %v", docIDs(r))
	}
	if err := x.Delete(ctx, "doc_leave"); err != nil {
		t.Fatalf("Delete(doc_leave): %v", err)
	}
	for _, q := range []Query{q, fused} {
		r := search(t, []Scope{{x, corral.SourcePrivate}}, q)
		for _, p := range r.Items {
			if p.DocumentID == "doc_leave" {
				t.Errorf("a %s search found the deleted document", r.Ranker)
			}
		}
	}
	ds, err := x.Documents(ctx)
	if err != nil || len(ds) != 1 || ds[0].ID != "doc_expenses" {
		t.Errorf("Documents() = %v, %v; want doc_expenses alone", ds, err)
	}
	for _, tc := range []struct{ name, id string }{{"deleted", "doc_leave"}, {"unknown", "doc_nope"}, {"empty", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := x.Delete(ctx, tc.id); corral.ErrorCode(err) != corral.ENOTFOUND {
				t.Errorf("Delete(%q) = %v, want %s", tc.id, err, corral.ENOTFOUND)
			}
			if _, err := x.Document(ctx, tc.id); corral.ErrorCode(err) != corral.ENOTFOUND {
				t.Errorf("Document(%q) = %v, want %s", tc.id, err, corral.ENOTFOUND)
			}
		})
	}
	// The vectors in memory are the remaining document's only.
	x.mu.Lock()
	cached := len(x.vecs.rows)
	x.mu.Unlock()
	if want := len(Split("expenses.md", expensesDoc)); cached != want {
		t.Errorf("%d vectors in memory after the delete, want %d", cached, want)
	}
	// What the confidence counts (chunks, and chunks per term) follows:
	// the store answers as one that never held the document.
	fresh := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	addDoc(t, fresh, "doc_expenses", "expenses.md", expensesDoc, true)
	for _, qt := range []string{"meals reimbursed per day", "parental leave for meals"} {
		got := search(t, []Scope{{x, corral.SourcePrivate}}, Query{Text: qt, Weak: true})
		want := search(t, []Scope{{fresh, corral.SourcePrivate}}, Query{Text: qt, Weak: true})
		if got.Confidence != want.Confidence || len(got.Items) != len(want.Items) {
			t.Errorf("%q after the delete: confidence %v, %d passages; a store that never held it: %v, %d",
				qt, got.Confidence, len(got.Items), want.Confidence, len(want.Items))
		}
	}
	// A store emptied is a store of none.
	if err := x.Delete(ctx, "doc_expenses"); err != nil {
		t.Fatal(err)
	}
	if r := search(t, []Scope{{x, corral.SourcePrivate}}, Query{Text: "meals reimbursed", Weak: true}); len(r.Items) != 0 || r.Confidence != 0 {
		t.Errorf("an emptied store answered %v (confidence %v)", docIDs(r), r.Confidence)
	}
}

// TestSearchAnswerable: a question the documents answer is answerable; one
// about what they never mention is not, and gets no passages unless the
// search asks for weak ones; a query's Threshold overrides the default.
func TestSearchAnswerable(t *testing.T) {
	x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	addDoc(t, x, "doc_leave", "leave.md", leaveDoc, false)
	addDoc(t, x, "doc_expenses", "expenses.md", expensesDoc, false)
	addDoc(t, x, "doc_brand", "brand.md", colorDoc, false)
	scopes := []Scope{{x, corral.SourcePrivate}}
	const (
		answered = "How many weeks of paid parental leave do new parents get within the first year?"
		// A near miss: some of its words are in the documents, its
		// subject is not.
		unanswered = "How many weeks of leave do astronauts get for a mission to Mars?"
	)

	yes := search(t, scopes, Query{Text: answered})
	if !yes.Answerable || len(yes.Items) == 0 || yes.Items[0].DocumentID != "doc_leave" {
		t.Fatalf("%q: answerable %v (confidence %v), passages %v; want answerable from doc_leave", answered, yes.Answerable, yes.Confidence, docIDs(yes))
	}
	if yes.Confidence < Threshold || yes.Items[0].Score != yes.Confidence {
		t.Errorf("%q: confidence %v, best score %v; want the best score, at least %v", answered, yes.Confidence, yes.Items[0].Score, Threshold)
	}
	no := search(t, scopes, Query{Text: unanswered})
	if no.Answerable || len(no.Items) != 0 {
		t.Fatalf("%q: answerable %v (confidence %v), passages %v; want none", unanswered, no.Answerable, no.Confidence, docIDs(no))
	}
	if no.Confidence <= 0 || no.Confidence >= yes.Confidence {
		t.Errorf("%q: confidence %v, want above 0 (its words are in the documents) and below %v", unanswered, no.Confidence, yes.Confidence)
	}
	nothing := search(t, scopes, Query{Text: "What is the boiling point of mercury?", Weak: true})
	if nothing.Answerable || len(nothing.Items) != 0 || nothing.Confidence != 0 {
		t.Errorf("a query of words no document holds: answerable %v, confidence %v, passages %v", nothing.Answerable, nothing.Confidence, docIDs(nothing))
	}

	for _, tc := range []struct {
		name       string
		q          Query
		answerable bool
		items      bool
	}{
		{"weak passages of an unanswerable query", Query{Text: unanswered, Weak: true}, false, true},
		{"weak of an answerable query", Query{Text: answered, Weak: true}, true, true},
		{"a threshold at its confidence answers", Query{Text: unanswered, Threshold: no.Confidence}, true, true},
		{"a threshold above its confidence refuses", Query{Text: answered, Threshold: yes.Confidence + 0.001}, false, false},
		{"weak under a higher threshold", Query{Text: answered, Threshold: yes.Confidence + 0.001, Weak: true}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := search(t, scopes, tc.q)
			if r.Answerable != tc.answerable || (len(r.Items) > 0) != tc.items {
				t.Errorf("answerable %v (confidence %v), %d passages; want answerable %v, passages %v",
					r.Answerable, r.Confidence, len(r.Items), tc.answerable, tc.items)
			}
			for _, p := range r.Items {
				if p.Score > r.Confidence || p.Score < 0 {
					t.Errorf("passage %s scores %v, confidence %v", p.ChunkID, p.Score, r.Confidence)
				}
			}
		})
	}
}

func TestSearchK(t *testing.T) {
	x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	for i := 0; i < 30; i++ {
		addDoc(t, x, fmt.Sprintf("doc_%02d", i), fmt.Sprintf("leave-%02d.md", i), leaveDoc, false)
	}
	for _, tc := range []struct{ k, want int }{{0, DefaultK}, {1, 1}, {-3, DefaultK}, {MaxK + 10, MaxK}} {
		r := search(t, []Scope{{x, corral.SourcePrivate}}, Query{Text: "parental leave", K: tc.k, Weak: true})
		if len(r.Items) != tc.want {
			t.Errorf("K %d: %d passages, want %d", tc.k, len(r.Items), tc.want)
		}
	}
}

// TestSearchFused: with an embedder the rankings are fused; an embedder
// that fails leaves BM25 alone, says so, and still answers.
func TestSearchFused(t *testing.T) {
	x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	addDoc(t, x, "doc_leave", "leave.md", leaveDoc, true)
	addDoc(t, x, "doc_expenses", "expenses.md", expensesDoc, true)
	addDoc(t, x, "doc_brand", "brand.md", colorDoc, true)
	scopes := []Scope{{x, corral.SourcePrivate}}
	const question = "How many weeks of paid parental leave do new parents get within the first year?"
	failing := func(context.Context, []string) ([][]float32, error) {
		return nil, errors.New("provider said: key sk-test-secret is invalid")
	}
	short := func(context.Context, []string) ([][]float32, error) { return nil, nil }
	for _, tc := range []struct {
		name   string
		embed  Embedder
		ranker string
		note   bool
	}{
		{"no embedder", nil, "bm25", false},
		{"embedder", embedder, "fused", false},
		{"failing embedder", failing, "bm25", true},
		{"embedder answering nothing", short, "bm25", true},
		{"failing with a corral error", func(context.Context, []string) ([][]float32, error) {
			return nil, corral.Errorf(corral.EUNAVAIL, "the embedding model is unavailable")
		}, "bm25", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := search(t, scopes, Query{Text: question, Embed: tc.embed})
			if r.Ranker != tc.ranker || (r.Note != "") != tc.note {
				t.Errorf("ranker %q, note %q; want %q, a note %v", r.Ranker, r.Note, tc.ranker, tc.note)
			}
			if strings.Contains(r.Note, "sk-test-secret") {
				t.Errorf("the note shows the embedder's internal error: %q", r.Note)
			}
			if !r.Answerable || len(r.Items) == 0 || r.Items[0].DocumentID != "doc_leave" {
				t.Errorf("answerable %v (confidence %v), passages %v; want doc_leave first", r.Answerable, r.Confidence, docIDs(r))
			}
		})
	}

	// A passage that shares no term with the query but is near it by
	// vector comes back only from the fused ranking.
	for _, tc := range []struct {
		embed Embedder
		want  bool
	}{{nil, false}, {embedder, true}} {
		r := search(t, scopes, Query{Text: "colours", Embed: tc.embed, Weak: true, K: MaxK})
		got := strings.Contains(strings.Join(docIDs(r), " "), "doc_brand")
		if got != tc.want {
			t.Errorf("%q by %s found doc_brand %v, want %v (passages %v)", "colours", r.Ranker, got, tc.want, docIDs(r))
		}
	}
}

// TestSearchVectorsAddedAfterLoad: a document added once the store's
// vectors are in memory is found by vector too.
func TestSearchVectorsAddedAfterLoad(t *testing.T) {
	x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	addDoc(t, x, "doc_leave", "leave.md", leaveDoc, true)
	scopes := []Scope{{x, corral.SourcePrivate}}
	search(t, scopes, Query{Text: "leave", Embed: embedder}) // loads the vectors
	addDoc(t, x, "doc_brand", "brand.md", colorDoc, true)
	r := search(t, scopes, Query{Text: "colours", Embed: embedder, Weak: true, K: MaxK})
	if !strings.Contains(strings.Join(docIDs(r), " "), "doc_brand") {
		t.Errorf("a document added after the vectors were loaded is not found by vector: %v", docIDs(r))
	}
}

func TestSearchQueryValidation(t *testing.T) {
	x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
	addDoc(t, x, "doc_leave", "leave.md", leaveDoc, false)
	for _, tc := range []struct {
		name, text, code string
	}{
		{"empty", "", corral.EINVALID},
		{"blank", " \t\n ", corral.EINVALID},
		{"over the limit", strings.Repeat("leave ", MaxQueryBytes/6) + "parental", corral.ETOOLARGE},
		{"one byte over", strings.Repeat("a", MaxQueryBytes+1), corral.ETOOLARGE},
		{"at the limit", strings.Repeat("a", MaxQueryBytes-5) + "leave", ""},
		{"only stop words", "the and of", ""},
		{"punctuation", "?!…", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Search(context.Background(), []Scope{{x, corral.SourcePrivate}}, Query{Text: tc.text})
			if corral.ErrorCode(err) != tc.code {
				t.Errorf("Search(%d bytes) = %v, want code %q", len(tc.text), err, tc.code)
			}
		})
	}
}

// TestVectorsLoadedDuringWrites: documents added while a first vector
// search loads the store's vectors are all in memory afterwards, once
// each (a write committing between the load's read and its caching was
// lost, or cached twice).
func TestVectorsLoadedDuringWrites(t *testing.T) {
	ctx := context.Background()
	for trial := 0; trial < 10; trial++ {
		x := openIndex(t, filepath.Join(t.TempDir(), "documents.db"), "agt_a")
		for i := 0; i < 60; i++ {
			addDoc(t, x, fmt.Sprintf("doc_%03d", i), "leave.md", leaveDoc+expensesDoc+colorDoc, true)
		}
		errs := make(chan error, 2)
		go func() {
			_, err := Search(ctx, []Scope{{x, corral.SourcePrivate}}, Query{Text: "leave", Embed: embedder})
			errs <- err
		}()
		go func() {
			var err error
			for i := 0; i < 20 && err == nil; i++ {
				d := corral.Document{ID: fmt.Sprintf("doc_new_%03d", i), Name: "brand.md", CreatedAt: time.Now()}
				chunks := Split("brand.md", colorDoc)
				err = x.Add(ctx, d, chunks, [][]float32{embedChunk(chunks[0])})
			}
			errs <- err
		}()
		for i := 0; i < 2; i++ {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		var stored int
		if err := x.db.QueryRowContext(ctx, `SELECT count(*) FROM chunks WHERE vector IS NOT NULL`).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		x.mu.Lock()
		distinct := map[int64]bool{}
		for _, r := range x.vecs.rows {
			distinct[r.id] = true
		}
		cached := len(x.vecs.rows)
		x.mu.Unlock()
		if cached != stored || len(distinct) != stored {
			t.Errorf("trial %d: %d vectors in memory (%d distinct), %d in the file", trial, cached, len(distinct), stored)
		}
	}
}
