package store

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

// TestSchemasAgree: the two migration sets make the same tables with the
// same columns in the same order, so that one set of queries serves both
// and a copy moves every column. A migration added to one set only fails
// here.
func TestSchemasAgree(t *testing.T) {
	ctx := context.Background()
	lite := openAt(t, filepath.Join(t.TempDir(), "corral.db"))
	pg := openPG(t, newPGDatabase(t))
	columns := func(db *DB, query string) map[string][]string {
		t.Helper()
		rows, err := db.query(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string][]string{}
		for rows.Next() {
			var table, col string
			if err := rows.Scan(&table, &col); err != nil {
				t.Fatal(err)
			}
			out[table] = append(out[table], col)
		}
		return out
	}
	want := columns(lite, `SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c
		WHERE m.type = 'table' AND m.name NOT IN ('goose_db_version', 'sqlite_sequence') ORDER BY m.name, c.cid`)
	got := columns(pg, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name != 'goose_db_version' ORDER BY table_name, ordinal_position`)
	for table, cols := range want {
		if !slices.Equal(got[table], cols) {
			t.Errorf("table %s: PostgreSQL's columns %v, SQLite's %v", table, got[table], cols)
		}
	}
	for table := range got {
		if _, ok := want[table]; !ok {
			t.Errorf("table %s is on PostgreSQL only", table)
		}
	}
	if len(want) < 20 {
		t.Fatalf("SQLite has %d tables: the query read nothing", len(want))
	}
}
