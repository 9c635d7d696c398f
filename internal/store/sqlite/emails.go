package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"

	"corral/internal/sanitize"
)

// goMigrations are the migrations SQL cannot express. Their versions share
// one sequence with the files in migrations/.
var goMigrations = []*goose.Migration{
	// 8: stored emails into the form sanitize.Email gives since it
	// normalises to NFC. Down leaves them: the new form is also a valid
	// old one.
	goose.NewGoMigration(8, &goose.GoFunc{RunTx: normaliseEmails}, nil),
	// 17: the same, since sanitize.Email folds compatibility forms (NFKC)
	// and gives a domain one IDNA form: "victim@xn--exmple-4nf.com" and
	// "victim@exаmple.com" were two accounts for one mailbox.
	goose.NewGoMigration(17, &goose.GoFunc{RunTx: normaliseEmails}, nil),
}

// normaliseEmails rewrites every stored email into the form sanitize.Email
// returns today. Emails were first stored lower-cased, but not in NFC, so
// an account made with a decomposed "å" could no longer be found by a
// lookup of the normalised form; then in NFC, with a domain as typed. Two accounts whose emails become one are
// a conflict only a person can settle: the migration then fails, naming
// both accounts by id, and the server does not start until one of them is
// changed (nothing is rewritten: the transaction rolls back).
func normaliseEmails(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, email FROM users ORDER BY created_at, id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	type change struct{ id, email string }
	var changes []change
	owner := map[string]string{} // email as it will be → account id
	for rows.Next() {
		var id, email string
		if err := rows.Scan(&id, &email); err != nil {
			return err
		}
		norm, err := sanitize.Email(email)
		if err != nil {
			norm = email // accepted by an older rule: left as it is
		}
		if other, ok := owner[norm]; ok {
			return fmt.Errorf("accounts %s and %s have emails that are one address once normalised (Unicode NFKC, one IDNA form of the domain): "+
				"change the email of one of them (UPDATE users SET email = ... WHERE id = ...) and start again", other, id)
		}
		owner[norm] = id
		if norm != email {
			changes = append(changes, change{id, norm})
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	// No new form can meet an old one still waiting for its rewrite: the
	// form is idempotent, so that old one would have the same new form,
	// which the check above refused.
	for _, c := range changes {
		if _, err := tx.ExecContext(ctx, `UPDATE users SET email = ? WHERE id = ?`, c.email, c.id); err != nil {
			return err
		}
	}
	return nil
}
