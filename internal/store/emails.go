package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pressly/goose/v3"
	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"
)

// goMigrations are the migrations SQL cannot express. Their versions share
// one sequence with the files in migrations/. Like an SQL file, a Go
// migration never changes once released, so it calls no code that can
// (nothing of this module outside this file: see frozenEmail), and
// TestGoMigrationsAreFrozen holds this file to it.
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

// normaliseEmails rewrites every stored email into the form frozenEmail
// returns (sanitize.Email's when migration 17 was written). Emails were first stored lower-cased, but not in NFC, so
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
		norm, ok := frozenEmail(email)
		if !ok {
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

// frozenEmail is sanitize.Email as it was when migrations 8 and 17 last
// changed (with its helpers oneDomain, invisible and isASCII), copied here
// on purpose and never to be edited: a migration must do forever what it
// did when it was written, and a database that meets it years from now
// must end where the ones that met it then did. sanitize.Email is free to
// change; a new normalisation is a new migration with its own copy. (The
// Unicode and IDNA tables of golang.org/x/text and x/net are still the
// module's; they only ever grow.) false: not an address by those rules.
func frozenEmail(s string) (string, bool) {
	const maxEmail = 254
	if !utf8.ValidString(s) {
		return "", false
	}
	s = norm.NFKC.String(strings.ToLower(norm.NFKC.String(strings.TrimSpace(s))))
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || len(s) > maxEmail || strings.ContainsAny(s, `<>()[]\,;:"`) {
		return "", false
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return "", false
	}
	for _, l := range labels {
		if l == "" || strings.Contains(l, "@") {
			return "", false
		}
	}
	if d, ok := frozenOneDomain(domain); ok {
		domain = d
	} else if !frozenASCII(domain) {
		return "", false
	}
	s = local + "@" + domain
	if len(s) > maxEmail {
		return "", false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || frozenInvisible(r) {
			return "", false
		}
	}
	return s, true
}

// frozenOneDomain is sanitize's oneDomain of frozenEmail's time.
func frozenOneDomain(d string) (string, bool) {
	ascii, err := idna.Lookup.ToASCII(d)
	if err != nil {
		return "", false
	}
	u, err := idna.Lookup.ToUnicode(ascii)
	if err != nil {
		return "", false
	}
	return u, true
}

// frozenInvisible is sanitize's invisible of frozenEmail's time.
func frozenInvisible(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case unicode.Is(unicode.Bidi_Control, r):
		return true
	case r >= 0x200B && r <= 0x200D, r == 0x2060, r == 0xFEFF:
		return true
	case r >= 0x206A && r <= 0x206F:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

func frozenASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
