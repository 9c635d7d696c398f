package store

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"corral"
)

// addMessages appends n messages to agent; even ones are written by author,
// odd ones by no one. It returns their ids in order.
func addMessages(t *testing.T, db *DB, agent corral.Agent, author corral.User, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		m := corral.Message{
			ID:        corral.NewID("msg"),
			AgentID:   agent.ID,
			Role:      corral.RoleAssistant,
			Content:   fmt.Sprint(i),
			RunID:     "run_1",
			CreatedAt: t0, // equal times: order is insertion order
		}
		if i%2 == 0 {
			m.Role = corral.RoleUser
			m.Author = &corral.UserRef{ID: author.ID}
			m.RunID = ""
		}
		if err := db.AddMessage(context.Background(), m); err != nil {
			t.Fatalf("AddMessage %d: %v", i, err)
		}
		ids[i] = m.ID
	}
	return ids
}

func TestMessages(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	b := mustAgent(t, db, owner, "b", 0)
	ids := addMessages(t, db, a, owner, 25)
	idsB := addMessages(t, db, b, owner, 3)

	cases := []struct {
		name   string
		before string
		limit  int
		want   []string
	}{
		{"newest page", "", 10, ids[15:]},
		{"second page", ids[15], 10, ids[5:15]},
		{"last page is short", ids[5], 10, ids[:5]},
		{"before the first", ids[0], 10, nil},
		{"default limit", "", 0, ids},
		{"negative limit", "", -1, ids},
		{"limit of one", "", 1, ids[24:]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := db.Messages(ctx, a.ID, c.before, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			var gotIDs []string
			for _, m := range got {
				gotIDs = append(gotIDs, m.ID)
			}
			if fmt.Sprint(gotIDs) != fmt.Sprint(c.want) {
				t.Errorf("Messages(before %q, limit %d) = %v, want %v", c.before, c.limit, gotIDs, c.want)
			}
		})
	}

	t.Run("fields", func(t *testing.T) {
		got, err := db.Messages(ctx, a.ID, ids[2], 2)
		if err != nil {
			t.Fatal(err)
		}
		want := []corral.Message{
			{ID: ids[0], AgentID: a.ID, Role: corral.RoleUser, Content: "0", Author: &corral.UserRef{ID: owner.ID, Name: owner.Name}, CreatedAt: t0.Truncate(time.Millisecond)},
			{ID: ids[1], AgentID: a.ID, Role: corral.RoleAssistant, Content: "1", RunID: "run_1", CreatedAt: t0.Truncate(time.Millisecond)},
		}
		if len(got) != len(want) {
			t.Fatalf("got %d messages, want %d", len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if (g.Author == nil) != (w.Author == nil) || (g.Author != nil && *g.Author != *w.Author) {
				t.Errorf("message %d: Author = %+v, want %+v", i, g.Author, w.Author)
			}
			g.Author, w.Author = nil, nil
			if !reflect.DeepEqual(g, w) {
				t.Errorf("message %d = %+v, want %+v", i, g, w)
			}
		}
	})

	t.Run("unknown before", func(t *testing.T) {
		_, err := db.Messages(ctx, a.ID, "msg_nope", 10)
		wantNotFound(t, err, "message")
	})
	t.Run("before of another agent", func(t *testing.T) {
		_, err := db.Messages(ctx, a.ID, idsB[1], 10)
		wantNotFound(t, err, "message")
	})
	t.Run("unknown agent", func(t *testing.T) {
		got, err := db.Messages(ctx, "agt_nope", "", 10)
		if err != nil || len(got) != 0 {
			t.Errorf("Messages(unknown agent) = %+v, %v; want none", got, err)
		}
	})
}

// TestMessageSources: an answer's sources come back as stored; a message
// without any has none (NULL, not an empty list).
func TestMessageSources(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	sources := []corral.Source{
		{DocumentID: "doc_a", Name: "guide.md", Source: corral.SourcePrivate, Score: 0.91, Confidence: 0.91},
		{DocumentID: "doc_b", Name: "glossary.md", Source: corral.SourceLibrary, Score: 0.4, Confidence: 0.91},
	}
	for _, m := range []corral.Message{
		{ID: "msg_plain", AgentID: a.ID, Role: corral.RoleAssistant, Content: "no documents"},
		{ID: "msg_sourced", AgentID: a.ID, Role: corral.RoleAssistant, Content: "from documents", Sources: sources},
	} {
		if err := db.AddMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.Messages(ctx, a.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Sources != nil || !reflect.DeepEqual(got[1].Sources, sources) {
		t.Fatalf("messages = %+v, want no sources then %+v", got, sources)
	}
	if n := count(t, db, "messages", "sources IS NULL"); n != 1 {
		t.Fatalf("%d messages with NULL sources, want 1", n)
	}
}

func TestMessagesLimitCap(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	// Filled in one transaction: 1001 single commits would only be slow.
	tx, err := db.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxMessages + 1 {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO messages (id, agent_id, role, content, created_at) VALUES (?, ?, 'user', '', 0)`,
			fmt.Sprint("msg_", i), a.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		limit, want int
	}{
		{0, defaultMessages},
		{maxMessages, maxMessages},
		{maxMessages + 1, maxMessages},
		{1 << 30, maxMessages},
	} {
		got, err := db.Messages(ctx, a.ID, "", c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("Messages(limit %d) = %d messages, want %d", c.limit, len(got), c.want)
		}
		if len(got) > 0 && got[len(got)-1].ID != fmt.Sprint("msg_", maxMessages) {
			t.Errorf("Messages(limit %d) ends with %s, want the newest", c.limit, got[len(got)-1].ID)
		}
	}
}

func TestAddMessageErrors(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	owner := mustUser(t, db, "owner")
	a := mustAgent(t, db, owner, "a", 0)
	m := corral.Message{ID: corral.NewID("msg"), AgentID: a.ID, Role: corral.RoleUser, Content: "hi"}
	if err := db.AddMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(*corral.Message)
		code string
		kind string
	}{
		{"same id", func(*corral.Message) {}, corral.ECONFLICT, ""},
		{"unknown agent", func(m *corral.Message) { m.ID = corral.NewID("msg"); m.AgentID = "agt_nope" }, corral.ENOTFOUND, "agent"},
		{"unknown author", func(m *corral.Message) { m.ID = corral.NewID("msg"); m.Author = &corral.UserRef{ID: "usr_nope"} }, corral.ENOTFOUND, "user"},
		{"empty id", func(m *corral.Message) { m.ID = "" }, corral.EINTERNAL, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := m
			c.edit(&bad)
			err := db.AddMessage(ctx, bad)
			if c.kind != "" {
				wantNotFound(t, err, c.kind)
				return
			}
			wantCode(t, err, c.code)
		})
	}
}
