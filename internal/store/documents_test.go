package store

import (
	"context"
	"reflect"
	"testing"

	"corral"
)

// TestDocumentCopies: a document's copy comes back as it was kept, its
// vectors exact and its embedding said; a copy replaces the owner's
// copies it names and no one else's; deleting names the owner too; an
// owner's copies go together.
func TestDocumentCopies(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	author := &corral.UserRef{ID: "usr_1", Name: "A"}
	put := func(owner, id string, vectors bool, replace ...string) []corral.DocumentChunk {
		t.Helper()
		chunks := []corral.DocumentChunk{{Ord: 0, Heading: "Leave", Text: "Thirty days."}, {Ord: 1, Heading: "Leave > Parental", Text: "Six months, ünïcode."}}
		if vectors {
			chunks[0].Vector, chunks[1].Vector = []float32{0.6, 0.8}, []float32{-1, 0}
		}
		d := corral.Document{ID: id, Name: id + ".md", Bytes: 42, Author: author, CreatedAt: t0}
		if err := db.PutDocumentCopy(ctx, owner, d, chunks, replace); err != nil {
			t.Fatal(err)
		}
		return chunks
	}
	want := put("library", "doc_1", true)
	put("agt_1", "doc_2", false)
	put("agt_2", "doc_3", false)

	owner, d, chunks, err := db.DocumentCopy(ctx, "doc_1")
	if err != nil || owner != "library" || d.Name != "doc_1.md" || d.Bytes != 42 || !d.Embedded || d.Chunks != 2 ||
		!d.CreatedAt.Equal(t0) || d.Author == nil || *d.Author != *author || !reflect.DeepEqual(chunks, want) {
		t.Fatalf("DocumentCopy(doc_1) = %q %+v %+v, %v", owner, d, chunks, err)
	}
	if _, d, chunks, err := db.DocumentCopy(ctx, "doc_2"); err != nil || d.Embedded || chunks[0].Vector != nil {
		t.Fatalf("DocumentCopy(doc_2) = %+v %+v, %v; want no vectors", d, chunks, err)
	}
	if _, _, _, err := db.DocumentCopy(ctx, "doc_9"); corral.ErrorCode(err) != corral.ENOTFOUND {
		t.Fatalf("DocumentCopy(unknown) = %v", err)
	}

	put("library", "doc_4", false, "doc_1", "doc_3")                       // doc_3 is agt_2's: not replaced
	if err := db.DeleteDocumentCopy(ctx, "library", "doc_2"); err != nil { // agt_1's: not deleted
		t.Fatal(err)
	}
	ids, err := db.DocumentCopyIDs(ctx)
	if want := map[string][]string{"library": {"doc_4"}, "agt_1": {"doc_2"}, "agt_2": {"doc_3"}}; err != nil || !reflect.DeepEqual(ids, want) {
		t.Fatalf("DocumentCopyIDs = %v, %v; want %v", ids, err, want)
	}
	if err := db.DropDocumentCopies(ctx, "agt_1"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteDocumentCopy(ctx, "agt_2", "doc_3"); err != nil {
		t.Fatal(err)
	}
	ids, err = db.DocumentCopyIDs(ctx)
	if want := map[string][]string{"library": {"doc_4"}}; err != nil || !reflect.DeepEqual(ids, want) {
		t.Fatalf("DocumentCopyIDs after the drop = %v, %v; want %v", ids, err, want)
	}
	var chunksLeft int
	if err := db.queryRow(ctx, `SELECT count(*) FROM document_chunk_copies`).Scan(&chunksLeft); err != nil || chunksLeft != 2 {
		t.Fatalf("chunks left = %d, %v; want doc_4's 2", chunksLeft, err)
	}
}
