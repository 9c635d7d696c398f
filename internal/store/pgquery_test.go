package store

import "testing"

func TestPGQuery(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"bare", `SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = $1 AND c = $2`},
		{"numbered, reused", `WHERE a = ?2 OR b = ?1 OR c = ?2`, `WHERE a = $2 OR b = $1 OR c = $2`},
		{"bare after numbered", `WHERE a = ?3 AND b = ?`, `WHERE a = $3 AND b = $4`},
		{"in a string", `WHERE a = 'why?' AND b = ?`, `WHERE a = 'why?' AND b = $1`},
		{"doubled quote", `WHERE a = 'it''s?' AND b = ?`, `WHERE a = 'it''s?' AND b = $1`},
		{"comment", "SELECT 1 -- the run's? turn\nWHERE a = ?", "SELECT 1 -- the run's? turn\nWHERE a = $1"},
		{"cross join", `FROM agents a CROSS JOIN change_sets c ON c.agent_id = a.id`, `FROM agents a JOIN change_sets c ON c.agent_id = a.id`},
		{"indexed by", `FROM change_sets INDEXED BY change_sets_pending_disk WHERE s = ?`, `FROM change_sets WHERE s = $1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pgQuery(tt.in); got != tt.want {
				t.Errorf("pgQuery(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
