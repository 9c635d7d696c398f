// Package sanitize checks what people send before the rest of Corral sees
// it: one validator per kind of input (names, paths, message content, free
// text, emails, display names, passwords, model names, ids, hosts, URLs,
// git ref and branch names). No other package checks these kinds itself.
//
// Every entry point of the server runs its input through the validator for
// its kind and keeps what the validator returns, never the raw input: the
// returned value is normalised where the kind calls for it, so two spellings
// of one email or name cannot become two accounts or two files. A rejection
// is always a *corral.Error whose Message tells the user which rule the input
// broke, and never repeats a secret.
package sanitize

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"

	"corral"
)

// MaxContent is the usual limit, in bytes, on a chat message.
const MaxContent = 256 << 10

// Limits of the other kinds. They bound what a single field can cost to
// store, hash and display.
const (
	maxEmail       = 254 // the longest address SMTP can carry (RFC 5321)
	maxDisplayName = 100 // in characters
	minPassword    = 8   // in characters
	maxPassword    = 1024
	maxModelName   = 200
)

// Content checks the content of a chat message and returns it unchanged: a
// message is the user's own words and is stored byte for byte. It must be at
// most limit bytes (ETOOLARGE), because each message is kept and sent to the
// model; valid UTF-8, because it is shown as text and sent as JSON; free of
// NUL, which C code and some databases read as the end of the string; and
// not empty or all whitespace, which would only spend a model run on nothing
// (ECONTENT).
func Content(s string, limit int) (string, error) {
	if len(s) > limit { // first, so an oversize message is never scanned
		return "", corral.Errorf(corral.ETOOLARGE, "content is larger than %d bytes", limit)
	}
	switch {
	case !utf8.ValidString(s):
		return "", corral.Errorf(corral.ECONTENT, "invalid content: not valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return "", corral.Errorf(corral.ECONTENT, "invalid content: contains a NUL character")
	case strings.TrimSpace(s) == "":
		return "", corral.Errorf(corral.ECONTENT, "invalid content: empty or only whitespace")
	}
	return s, nil
}

// Text checks free text such as an agent's instructions and returns it
// unchanged. It may be empty; otherwise it follows the rules of Content:
// at most limit bytes (ETOOLARGE), valid UTF-8 and no NUL (ECONTENT). field
// names the input in the error message, so the user knows which one to fix.
func Text(field, s string, limit int) (string, error) {
	switch {
	case len(s) > limit:
		return "", corral.Errorf(corral.ETOOLARGE, "%s is larger than %d bytes", field, limit)
	case !utf8.ValidString(s):
		return "", corral.Errorf(corral.ECONTENT, "%s is not valid UTF-8", field)
	case strings.IndexByte(s, 0) >= 0:
		return "", corral.Errorf(corral.ECONTENT, "%s contains a NUL character", field)
	}
	return s, nil
}

// Email checks an email address and returns it in the one form accounts
// are stored and looked up by: trimmed, in Unicode NFKC, lower-cased, and in
// NFKC again (lower-casing can leave a letter and its mark apart where a
// precomposed lower-case letter exists, as "H̱" → "ẖ"), its domain in the
// one form IDNA gives it (oneDomain). So "Ada@Example.com " and
// "ada@example.com" are one account, and so are "ÅSA@x.se" typed with a
// combining ring and with the precomposed letter, a full-width
// "ｖｉｃｔｉｍ@ｅｘａｍｐｌｅ.com" and "victim@example.com", and
// "victim@xn--exmple-4nf.com" and "victim@exаmple.com" (an ASCII domain
// IDNA refuses, as one with "_", has one spelling and stays as it is; a
// non-ASCII one it refuses is refused). Case is folded
// with strings.ToLower, not full case folding: "ß" and "ss" stay two
// addresses.
//
// It is not a full RFC 5322 parser: it asks for exactly one "@" with
// something before it, a domain of at least two non-empty labels, no
// whitespace or control characters (they would split a header or a log
// line), none of the characters that delimit an address in a mail header
// (< > ( ) [ ] \ , ; : "), and at most 254 bytes. Quoted local parts and
// IP-literal domains, legal but unseen in practice, are refused with them.
// The error, code EINVALID, does not say which part is wrong.
func Email(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", invalidEmail()
	}
	// NFKC, not only NFC: compatibility forms fold, so a full-width
	// "ｖｉｃｔｉｍ" is "victim" and one mailbox stays one account.
	s = norm.NFKC.String(strings.ToLower(norm.NFKC.String(strings.TrimSpace(s))))
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || len(s) > maxEmail || strings.ContainsAny(s, `<>()[]\,;:"`) {
		return "", invalidEmail()
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return "", invalidEmail()
	}
	for _, l := range labels {
		if l == "" || strings.Contains(l, "@") {
			return "", invalidEmail()
		}
	}
	if d, ok := oneDomain(domain); ok {
		domain = d
	} else if !isASCII(domain) {
		// An ASCII name IDNA refuses (an underscore, say) has one
		// spelling already and stays as accepted before; a non-ASCII one
		// without a form is refused.
		return "", invalidEmail()
	}
	s = local + "@" + domain
	if len(s) > maxEmail {
		return "", invalidEmail()
	}
	for _, r := range s {
		if unicode.IsSpace(r) || invisible(r) {
			return "", invalidEmail()
		}
	}
	return s, nil
}

// oneDomain is a domain in the one form whatever its spelling: IDNA's
// lookup (UTS 46 mapping, then punycode), back to Unicode. So
// "xn--exmple-4nf.com" and "exаmple.com" (a Cyrillic а) are one domain,
// which is what a mail server delivers to; false for a name IDNA refuses.
func oneDomain(d string) (string, bool) {
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

// EmailMixedScript reports whether an address from Email mixes the
// letters of more than one script in its local part or in one label of
// its domain ("victim1" with a Cyrillic "і"): a look-alike of another
// address, for an administrator's eyes. Han, Hiragana, Katakana and
// Hangul count as one (Japanese and Korean mix them).
func EmailMixedScript(email string) bool {
	local, domain, _ := strings.Cut(email, "@")
	for _, part := range append([]string{local}, strings.Split(domain, ".")...) {
		first := ""
		for _, r := range part {
			sc := scriptOf(r)
			if sc == "" {
				continue
			}
			if first == "" {
				first = sc
			} else if sc != first {
				return true
			}
		}
	}
	return false
}

// scriptOf names the script of a letter, "" for anything else.
func scriptOf(r rune) string {
	if !unicode.IsLetter(r) {
		return ""
	}
	if r < utf8.RuneSelf {
		return "Latin"
	}
	for _, cjk := range []*unicode.RangeTable{unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul} {
		if unicode.Is(cjk, r) {
			return "CJK"
		}
	}
	for name, table := range unicode.Scripts {
		if name != "Common" && name != "Inherited" && unicode.Is(table, r) {
			return name
		}
	}
	return ""
}

// EmailASCII returns an address from Email with its domain in ASCII
// (punycode, "bücher.de" → "xn--bcher-kva.de"), or "" when the domain
// already is ASCII. It is for an administrator's eyes: a domain that only
// looks like a familiar one ("exаmple.com" with a Cyrillic а, "ｅxample.com"
// with a full-width ｅ) shows its difference in this form. The conversion
// is raw punycode of each label, without the IDNA lookup mapping, which
// would turn "ｅxample.com" into "example.com" and hide exactly what the
// administrator needs to see. The local part has no ASCII form and is
// left as it is.
func EmailASCII(email string) string {
	local, domain, ok := strings.Cut(email, "@")
	if !ok || isASCII(domain) {
		return ""
	}
	ascii, err := idna.Punycode.ToASCII(domain)
	if err != nil || !isASCII(ascii) {
		return ""
	}
	return local + "@" + ascii
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func invalidEmail() *corral.Error {
	return corral.Errorf(corral.EINVALID, "invalid email address")
}

// DisplayName checks a person's name as others will see it next to their
// messages, and returns it in NFC form with surrounding whitespace trimmed.
// It must be 1 to 100 characters and free of control, bidirectional and
// invisible characters, the same set Name refuses: a name shown to other
// users must not reorder the text around it or pass for someone else's.
// Code EINVALID.
func DisplayName(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", corral.Errorf(corral.EINVALID, "display name is not valid UTF-8")
	}
	s = strings.TrimSpace(norm.NFC.String(s))
	n := utf8.RuneCountInString(s)
	switch {
	case n == 0:
		return "", corral.Errorf(corral.EINVALID, "display name must not be empty")
	case n > maxDisplayName:
		return "", corral.Errorf(corral.EINVALID, "display name must be at most %d characters", maxDisplayName)
	}
	for _, r := range s {
		if invisible(r) {
			return "", corral.Errorf(corral.EINVALID, "display name contains a control or invisible character (%U)", r)
		}
	}
	return s, nil
}

// Password checks a new password. At least 8 characters keeps out the
// guessable ones; at most 1024 bytes bounds the cost of hashing it, which an
// attacker could otherwise drive up; valid UTF-8 and no NUL, because some
// hash implementations stop at a NUL and would ignore the rest. The error,
// code EINVALID, never contains the password.
func Password(s string) error {
	switch {
	case len(s) > maxPassword:
		return corral.Errorf(corral.EINVALID, "password must be at most %d bytes", maxPassword)
	case !utf8.ValidString(s):
		return corral.Errorf(corral.EINVALID, "password must be valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return corral.Errorf(corral.EINVALID, "password must not contain a NUL character")
	case utf8.RuneCountInString(s) < minPassword:
		return corral.Errorf(corral.EINVALID, "password must be at least %d characters", minPassword)
	}
	return nil
}

// ModelName checks the name of a model an agent uses and returns it
// unchanged. "" is allowed and means the server's default. Otherwise it is 1
// to 200 bytes of ASCII letters, digits and - _ . : / @ +, enough for every
// provider's names ("claude-3-5-sonnet@20240620", "openrouter/meta/llama3:8b")
// and nothing that could smuggle a space, a quote or a newline into a
// request or a command line. Code EINVALID.
func ModelName(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	ok := len(s) <= maxModelName
	for i := 0; ok && i < len(s); i++ {
		ok = modelByte(s[i])
	}
	if !ok {
		return "", corral.Errorf(corral.EINVALID,
			"invalid model name: at most %d ASCII letters, digits and - _ . : / @ +", maxModelName)
	}
	return s, nil
}

func modelByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.:/@+", c) >= 0
}
