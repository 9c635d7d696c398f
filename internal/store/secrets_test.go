package store

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"corral"
)

func TestSecretCRUD(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	alice := mustUser(t, db, "alice")
	a, b := mustAgent(t, db, alice, "a", 0), mustAgent(t, db, alice, "b", time.Second)
	first := corral.Secret{ID: corral.NewID("sec"), AgentID: a.ID, Name: "npm", Host: "registry.example.com",
		Header: "Authorization", CreatedAt: t0}
	second := corral.Secret{ID: corral.NewID("sec"), AgentID: a.ID, Name: "api", Host: "api.example.com",
		Header: "X-Api-Key", CreatedAt: t0.Add(time.Minute)}
	for _, s := range []corral.Secret{first, second} {
		if err := db.CreateSecret(ctx, s, []byte("sealed-"+s.Name), ""); err != nil {
			t.Fatalf("CreateSecret(%s): %v", s.Name, err)
		}
	}
	wantCode(t, db.CreateSecret(ctx, corral.Secret{ID: corral.NewID("sec"), AgentID: a.ID, Name: "npm", Host: "x.org", Header: "H"}, []byte("s"), ""), corral.ECONFLICT)
	wantNotFound(t, db.CreateSecret(ctx, corral.Secret{ID: corral.NewID("sec"), AgentID: "agt_nobody", Name: "n", Host: "x.org", Header: "H"}, []byte("s"), ""), "agent")
	if err := db.CreateSecret(ctx, corral.Secret{ID: corral.NewID("sec"), AgentID: b.ID, Name: "npm", Host: "x.org", Header: "H"}, []byte("s"), ""); err != nil {
		t.Fatalf("names are per agent: %v", err)
	}

	got, err := db.Secrets(ctx, a.ID)
	if err != nil || !reflect.DeepEqual(got, []corral.Secret{first, second}) {
		t.Fatalf("Secrets(a) = %+v, %v; want [%+v %+v] (oldest first)", got, err, first, second)
	}
	sealed, err := db.SealedSecrets(ctx, a.ID)
	if err != nil || len(sealed) != 2 || sealed[0].Secret != first || !bytes.Equal(sealed[0].Sealed, []byte("sealed-npm")) {
		t.Fatalf("SealedSecrets(a) = %+v, %v", sealed, err)
	}

	wantNotFound(t, db.DeleteSecret(ctx, b.ID, first.ID, ""), "secret") // another agent's
	if err := db.DeleteSecret(ctx, a.ID, first.ID, ""); err != nil {
		t.Fatalf("DeleteSecret: %v", err)
	}
	if got, _ := db.Secrets(ctx, a.ID); len(got) != 1 || got[0] != second {
		t.Fatalf("after delete: %+v", got)
	}
	// An agent's secrets go with it.
	if err := db.DeleteAgent(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := db.SealedSecrets(ctx, a.ID); err != nil || len(got) != 0 {
		t.Fatalf("secrets of a deleted agent: %+v, %v", got, err)
	}
}

func TestAgentEgressRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	a := mustAgent(t, db, mustUser(t, db, "alice"), "a", 0)
	a.Policy.Network = corral.NetworkAllowlist
	a.Policy.Egress = corral.Egress{Presets: []string{"npm"}, Allow: []corral.EgressRule{
		{Host: "*.internal.example", Ports: []int{8443}, Methods: []string{"GET"}, Paths: []string{"/v1/"}},
		{Host: "proxy.golang.org"},
	}}
	if err := db.UpdateAgent(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := db.Agent(ctx, a.ID, a.Owner.ID)
	if err != nil || got.Policy.Network != corral.NetworkAllowlist || !reflect.DeepEqual(got.Policy.Egress, a.Policy.Egress) {
		t.Fatalf("Agent = %+v, %v; want network allowlist and %+v", got.Policy, err, a.Policy.Egress)
	}
	a.Policy.Network = "open"
	wantCode(t, db.UpdateAgent(ctx, a), corral.EINTERNAL) // the CHECK holds
}
