package store

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"corral"
	"corral/internal/trace"
)

// auditKey names an audit entry by what it is, apart from its place.
func auditKey(e corral.AuditEvent) string {
	if e.Trace != nil {
		return fmt.Sprintf("trace %s/%d", e.Trace.RunID, e.Trace.Seq)
	}
	a := e.Account
	return fmt.Sprintf("account %s %s %s %s %s %s", a.Type, a.Actor, a.User, a.Agent, a.Object, a.Detail)
}

// accountEvents returns the account events after seq, without their times.
func accountEvents(t *testing.T, db *DB, after int64) []corral.AccountEvent {
	t.Helper()
	evs, err := db.Audit(context.Background(), after, maxAuditPage)
	if err != nil {
		t.Fatal(err)
	}
	var out []corral.AccountEvent
	for _, e := range evs {
		if e.Account != nil {
			a := *e.Account
			a.At = time.Time{}
			out = append(out, a)
		}
	}
	return out
}

// lastSeq is the audit log's newest entry, 0 for none.
func lastSeq(t *testing.T, db *DB) int64 {
	t.Helper()
	var n int64
	if err := db.queryRow(context.Background(), `SELECT coalesce(max(seq), 0) FROM audit`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAccountEventsRecorded: each change to accounts or access records
// one event, in its own transaction, naming who did it and to what; a
// change that does not happen (a second join, a refused insert) records
// none.
func TestAccountEventsRecorded(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	admin, ann, bob := mustUser(t, db, "admin"), mustUser(t, db, "ann"), mustUser(t, db, "bob")
	a := mustAgent(t, db, ann, "shared", 0)
	link := corral.Link{ID: "lnk_audit", AgentID: a.ID, Level: corral.LevelRunner, CreatedBy: ann.ID}
	cred := corral.CodeCredential{ID: "crd_audit", UserID: ann.ID, Name: "forge", Host: "git.example.org", Username: "ann"}
	secret := corral.Secret{ID: "sec_audit", AgentID: a.ID, Name: "npm", Host: "registry.npmjs.org", Header: "Authorization"}

	tests := []struct {
		name string
		do   func() error
		want []corral.AccountEvent // nil: none
	}{
		{"signup", func() error {
			_, err := db.CreateUser(ctx, corral.NewUser{Email: "new@example.com", Name: "New", PasswordHash: "$argon2id$fake"})
			return err
		}, nil}, // checked below: the id is the store's
		{"login", func() error {
			return db.CreateSession(ctx, corral.Session{ID: "ses_audit", UserID: bob.ID, TokenHash: []byte("h1"), ExpiresAt: t0.Add(time.Hour)})
		}, []corral.AccountEvent{{Type: corral.AccountLogin, Actor: bob.ID, Object: "ses_audit"}}},
		{"logout", func() error { return db.DeleteSession(ctx, []byte("h1")) },
			[]corral.AccountEvent{{Type: corral.AccountLogout, Actor: bob.ID, Object: "ses_audit"}}},
		{"logout again", func() error {
			wantNotFound(t, db.DeleteSession(ctx, []byte("h1")), "session")
			return nil
		}, nil},
		{"disable", func() error { return db.SetDisabled(ctx, bob.ID, true, admin.ID) },
			[]corral.AccountEvent{{Type: corral.AccountDisabled, Actor: admin.ID, User: bob.ID}}},
		{"enable on the command line", func() error { return db.SetDisabled(ctx, bob.ID, false, "") },
			[]corral.AccountEvent{{Type: corral.AccountEnabled, User: bob.ID}}},
		{"invite", func() error {
			return db.CreateInvite(ctx, corral.Invite{ID: "inv_audit", CreatedBy: admin.ID, ExpiresAt: t0.Add(time.Hour)}, []byte("h2"))
		}, []corral.AccountEvent{{Type: corral.InviteCreated, Actor: admin.ID, Object: "inv_audit"}}},
		{"token", func() error {
			return db.CreateToken(ctx, corral.APIToken{ID: "tok_audit", UserID: bob.ID, Name: "ci"}, []byte("h3"))
		},
			[]corral.AccountEvent{{Type: corral.TokenCreated, Actor: bob.ID, Object: "tok_audit"}}},
		{"token deleted", func() error { return db.DeleteToken(ctx, bob.ID, "tok_audit") },
			[]corral.AccountEvent{{Type: corral.TokenDeleted, Actor: bob.ID, Object: "tok_audit"}}},
		{"grant", func() error { return db.PutGrant(ctx, a.ID, bob.ID, corral.LevelEditor, t0, ann.ID) },
			[]corral.AccountEvent{{Type: corral.GrantPut, Actor: ann.ID, User: bob.ID, Agent: a.ID, Detail: "editor"}}},
		{"grant accepted", func() error { return db.AcceptGrant(ctx, a.ID, bob.ID) },
			[]corral.AccountEvent{{Type: corral.GrantAccepted, Actor: bob.ID, Agent: a.ID}}},
		{"grant accepted again", func() error { return db.AcceptGrant(ctx, a.ID, bob.ID) }, nil},
		{"grant deleted", func() error { return db.DeleteGrant(ctx, a.ID, bob.ID, ann.ID) },
			[]corral.AccountEvent{{Type: corral.GrantDeleted, Actor: ann.ID, User: bob.ID, Agent: a.ID}}},
		{"link", func() error { return db.CreateLink(ctx, link, []byte("h4")) },
			[]corral.AccountEvent{{Type: corral.LinkCreated, Actor: ann.ID, Agent: a.ID, Object: link.ID, Detail: "runner"}}},
		{"link joined", func() error { return db.JoinLink(ctx, link.ID, bob.ID, t0) },
			[]corral.AccountEvent{{Type: corral.LinkJoined, Actor: bob.ID, Agent: a.ID, Object: link.ID}}},
		{"link joined again", func() error { return db.JoinLink(ctx, link.ID, bob.ID, t0) }, nil},
		{"link deleted", func() error { return db.DeleteLink(ctx, a.ID, link.ID, ann.ID) },
			[]corral.AccountEvent{{Type: corral.LinkDeleted, Actor: ann.ID, Agent: a.ID, Object: link.ID}}},
		{"credential", func() error { return db.CreateCodeCredential(ctx, cred, []byte("sealed")) },
			[]corral.AccountEvent{{Type: corral.CredentialCreated, Actor: ann.ID, Object: cred.ID}}},
		{"credential's repositories", func() error {
			_, err := db.SetCredentialRepositories(ctx, ann.ID, cred.ID, []string{"git.example.org/a/b"})
			return err
		}, []corral.AccountEvent{{Type: corral.CredentialRepositories, Actor: ann.ID, Object: cred.ID}}},
		{"credential taken", func() error {
			wantCode(t, db.CreateCodeCredential(ctx, cred, []byte("sealed")), corral.ECONFLICT)
			return nil
		}, nil},
		{"credential deleted", func() error { return db.DeleteCodeCredential(ctx, ann.ID, cred.ID) },
			[]corral.AccountEvent{{Type: corral.CredentialDeleted, Actor: ann.ID, Object: cred.ID}}},
		{"secret", func() error { return db.CreateSecret(ctx, secret, []byte("sealed"), bob.ID) },
			[]corral.AccountEvent{{Type: corral.SecretCreated, Actor: bob.ID, Agent: a.ID, Object: secret.ID}}},
		{"secret deleted", func() error { return db.DeleteSecret(ctx, a.ID, secret.ID, ann.ID) },
			[]corral.AccountEvent{{Type: corral.SecretDeleted, Actor: ann.ID, Agent: a.ID, Object: secret.ID}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := lastSeq(t, db)
			if err := tt.do(); err != nil {
				t.Fatal(err)
			}
			got := accountEvents(t, db, before)
			if tt.name == "signup" {
				if len(got) != 1 || got[0].Type != corral.AccountCreated || got[0].Actor == "" || got[0].Actor != got[0].User || got[0].Detail != "signup" {
					t.Errorf("signup recorded %+v, want one account_created by the new account, detail signup", got)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("recorded %+v\nwant %+v", got, tt.want)
			}
		})
	}

	// An invite's signup, and one on the command line.
	before := lastSeq(t, db)
	u, err := db.CreateUserWithInvite(ctx, []byte("h2"), t0, corral.NewUser{Email: "invited@example.com", Name: "I", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := db.CreateUser(ctx, corral.NewUser{Email: "cli@example.com", Name: "C", PasswordHash: "x", Origin: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	want := []corral.AccountEvent{
		{Type: corral.AccountCreated, Actor: u.ID, User: u.ID, Object: "inv_audit", Detail: "invite"},
		{Type: corral.AccountCreated, User: cli.ID, Detail: "cli"},
	}
	if got := accountEvents(t, db, before); !reflect.DeepEqual(got, want) {
		t.Errorf("invite and command-line signups recorded %+v\nwant %+v", got, want)
	}
}

func TestAuditIsAppendOnly(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	mustUser(t, db, "someone")
	for _, stmt := range []string{
		`UPDATE account_events SET actor_id = 'usr_forged'`,
		`DELETE FROM account_events`,
		`UPDATE audit SET seq = seq + 100`,
		`DELETE FROM audit`,
	} {
		if _, err := db.exec(ctx, stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want refused as append-only", stmt, err)
		}
	}
	if n := lastSeq(t, db); n != 1 {
		t.Errorf("the audit log holds %d entries, want the one signup", n)
	}
}

// TestAuditPagesExactlyOnceUnderWrites: writers append trace events (each
// to its own chain, as runs do) and make account changes while a reader
// pages through the log with small pages; once the writers are done and
// the reader has caught up, the pages hold every entry of the log exactly
// once, in order.
func TestAuditPagesExactlyOnceUnderWrites(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	rec := trace.NewRecorder(db, nil)
	const writers, each = 6, 40
	users := make([]corral.User, writers)
	for i := range users {
		users[i] = mustUser(t, db, fmt.Sprintf("writer%d", i))
	}

	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var err error
				switch i % 3 {
				case 0, 1:
					_, err = rec.Append(ctx, fmt.Sprintf("run_w%d", w), trace.ToolCall, map[string]int{"i": i})
				default:
					id := fmt.Sprintf("tok_w%d_%d", w, i)
					if err = db.CreateToken(ctx, corral.APIToken{ID: id, UserID: users[w].ID, Name: id}, []byte(id)); err == nil {
						err = db.DeleteToken(ctx, users[w].ID, id)
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	var pages []corral.AuditEvent
	after, pagesRead := int64(0), 0
	for caughtUp := false; !caughtUp; {
		finished := false
		select {
		case <-done:
			finished = true
		default:
		}
		page, err := db.Audit(ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		pagesRead++
		pages = append(pages, page...)
		if len(page) > 0 {
			after = page[len(page)-1].Seq
		}
		// Caught up: the writers had finished before this page was
		// asked for, and it was the last.
		caughtUp = finished && len(page) < 3
	}

	all, err := db.Audit(ctx, 0, maxAuditPage)
	if err != nil {
		t.Fatal(err)
	}
	wantEntries := writers + writers*(each/3*2+each%3) + writers*(each/3)*2
	if len(all) != wantEntries {
		t.Fatalf("the log holds %d entries, want %d", len(all), wantEntries)
	}
	seen := map[string]bool{}
	for i, e := range pages {
		if i > 0 && e.Seq <= pages[i-1].Seq {
			t.Fatalf("page entries out of order: %d after %d", e.Seq, pages[i-1].Seq)
		}
		if seen[auditKey(e)] {
			t.Fatalf("%s came twice", auditKey(e))
		}
		seen[auditKey(e)] = true
	}
	for _, e := range all {
		if !seen[auditKey(e)] {
			t.Errorf("%s never came in a page", auditKey(e))
		}
	}
	if len(pages) != len(all) {
		t.Errorf("the pages held %d entries, the log %d", len(pages), len(all))
	}
	if pagesRead < 10 {
		t.Logf("only %d pages were read: the reader hardly overlapped the writers", pagesRead)
	}
	// The trace entries are the chains as stored, in each chain's order.
	next := map[string]int64{}
	for _, e := range pages {
		if e.Trace != nil {
			next[e.Trace.RunID]++
			if e.Trace.Seq != next[e.Trace.RunID] {
				t.Fatalf("chain %s: event %d came where %d was due", e.Trace.RunID, e.Trace.Seq, next[e.Trace.RunID])
			}
		}
	}
}

// TestAuditTakesEarlierTraces: trace events stored before the audit log
// existed enter it, in the order they were written, before any later one.
func TestAuditTakesEarlierTraces(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/corral.db"
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	downTo(t, db, 22)
	rec := trace.NewRecorder(db, nil)
	var order []string
	for i := range 3 {
		for _, run := range []string{"run_b", "run_a"} {
			if _, err := rec.Append(ctx, run, trace.Message, i); err != nil {
				t.Fatal(err)
			}
			order = append(order, fmt.Sprintf("trace %s/%d", run, i+1))
		}
	}
	db.Close()
	if db, err = Open(ctx, path); err != nil {
		t.Fatalf("Open with migration 23 pending: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := trace.NewRecorder(db, nil).Append(ctx, "run_a", trace.Ended, nil); err != nil {
		t.Fatal(err)
	}
	order = append(order, "trace run_a/4")
	evs, err := db.Audit(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, auditKey(e))
	}
	if !reflect.DeepEqual(got, order) {
		t.Errorf("audit log after the migration:\n%v\nwant\n%v", got, order)
	}
}
