package sanitize_test

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"corral"
	"corral/internal/sanitize"
)

// checkErr fails unless err is a *corral.Error with code, and returns its
// message.
func checkErr(t *testing.T, call string, err error, code string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want code %q", call, code)
	}
	if got := corral.ErrorCode(err); got != code {
		t.Errorf("%s: code %q, want %q (error %v)", call, got, code, err)
	}
	return corral.ErrorMessage(err)
}

func TestContent(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		code  string // "" when accepted
	}{
		{"plain", "hello", 100, ""},
		{"surrounding space kept", "  hi there \n", 100, ""},
		{"not normalised", "cafe\u0301", 100, ""},
		{"bidi allowed in prose", "abc \u202Edef", 100, ""},
		{"exact limit", strings.Repeat("a", 10), 10, ""},
		{"exact MaxContent", strings.Repeat("a", sanitize.MaxContent), sanitize.MaxContent, ""},
		{"empty", "", 100, corral.ECONTENT},
		{"whitespace only", " \t\n\u00a0\u3000", 100, corral.ECONTENT},
		{"NUL", "a\x00b", 100, corral.ECONTENT},
		{"only NUL", "\x00", 100, corral.ECONTENT},
		{"invalid UTF-8", "a\xffb", 100, corral.ECONTENT},
		{"one over limit", strings.Repeat("a", 11), 10, corral.ETOOLARGE},
		{"one over MaxContent", strings.Repeat("a", sanitize.MaxContent+1), sanitize.MaxContent, corral.ETOOLARGE},
		{"multi-byte over limit", "ééééé!", 10, corral.ETOOLARGE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sanitize.Content(tt.in, tt.limit)
			call := "Content(" + short(tt.in) + ", " + strconv.Itoa(tt.limit) + ")"
			if tt.code == "" {
				if err != nil {
					t.Fatalf("%s: %v", call, err)
				}
				if got != tt.in {
					t.Errorf("%s = %q, want input unchanged", call, short(got))
				}
				return
			}
			msg := checkErr(t, call, err, tt.code)
			if tt.code == corral.ETOOLARGE && !strings.Contains(msg, strconv.Itoa(tt.limit)+" bytes") {
				t.Errorf("%s message = %q, want the limit in bytes", call, msg)
			}
			if tt.code == corral.ECONTENT && !strings.HasPrefix(msg, "invalid content: ") {
				t.Errorf("%s message = %q, want prefix %q", call, msg, "invalid content: ")
			}
		})
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		code  string
	}{
		{"empty allowed", "", 10, ""},
		{"whitespace allowed", "  \n", 10, ""},
		{"exact limit", "0123456789", 10, ""},
		{"not normalised", "e\u0301", 10, ""},
		{"over limit", "0123456789a", 10, corral.ETOOLARGE},
		{"NUL", "a\x00", 10, corral.ECONTENT},
		{"invalid UTF-8", "\xc3", 10, corral.ECONTENT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sanitize.Text("instructions", tt.in, tt.limit)
			if tt.code == "" {
				if err != nil || got != tt.in {
					t.Errorf("Text(%q) = %q, %v, want %q, nil", tt.in, got, err, tt.in)
				}
				return
			}
			msg := checkErr(t, "Text("+strconv.Quote(tt.in)+")", err, tt.code)
			if !strings.HasPrefix(msg, "instructions ") {
				t.Errorf("Text(%q) message = %q, want it to name the field", tt.in, msg)
			}
		})
	}
}

func TestEmail(t *testing.T) {
	tests := []struct {
		name, in, want string // want "" when rejected
	}{
		{"plain", "ada@example.com", "ada@example.com"},
		{"trimmed and lowercased", "  Ada.Lovelace@Example.COM \n", "ada.lovelace@example.com"},
		{"plus", "ada+corral@mail.example.org", "ada+corral@mail.example.org"},
		{"unicode lowercased", "ÜBER@Bücher.DE", "über@bücher.de"},
		{"precomposed, lowercased", "\u00c5SA@x.se", "\u00e5sa@x.se"},
		{"combining ring composed", "A\u030aSA@x.se", "\u00e5sa@x.se"},
		{"angstrom sign composed", "\u212bsa@x.se", "\u00e5sa@x.se"},
		{"combining mark in the domain", "ada@bu\u0308cher.de", "ada@b\u00fccher.de"},
		{"composed again after lowercasing", "H\u0331@x.se", "\u1e96@x.se"},
		{"dotted capital I", "\u0130@x.se", "i@x.se"}, // Go lower-cases it to a plain i
		{"sharp s is not ss", "Stra\u00dfe@x.de", "stra\u00dfe@x.de"},
		{"an ASCII domain IDNA refuses stays", "ada@mail_1.example.com", "ada@mail_1.example.com"},
		{"a non-ASCII domain IDNA refuses (the bidi rule)", "ada@\u0661\u0662a.com", ""},
		{"254 bytes", strings.Repeat("a", 249) + "@b.co", strings.Repeat("a", 249) + "@b.co"},
		{"empty", "", ""},
		{"spaces", "   ", ""},
		{"no at", "ada.example.com", ""},
		{"two ats", "ada@lovelace@example.com", ""},
		{"empty local", "@example.com", ""},
		{"empty domain", "ada@", ""},
		{"no dot in domain", "ada@localhost", ""},
		{"leading dot in domain", "ada@.com", ""},
		{"trailing dot in domain", "ada@example.", ""},
		{"double dot in domain", "ada@example..com", ""},
		{"space inside", "ada lovelace@example.com", ""},
		{"no-break space inside", "ada\u00a0@example.com", ""},
		{"newline inside", "ada@example.com\nBcc: eve@example.com", ""},
		{"NUL", "ada\x00@example.com", ""},
		{"bidi", "ada\u202E@example.com", ""},
		{"zero-width", "a\u200Bda@example.com", ""},
		{"invalid UTF-8", "ada\xff@example.com", ""},
		{"255 bytes", strings.Repeat("a", 250) + "@b.co", ""},
		{"angle brackets", "<ada@example.com>", ""},
		{"display form", "Ada <ada@example.com>", ""},
		{"quoted local part", `"ada"@example.com`, ""},
		{"comma list", "ada@example.com,eve@example.com", ""},
		{"ip literal", "ada@[127.0.0.1]", ""},
		{"backslash", `ada\@example.com`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sanitize.Email(tt.in)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Errorf("Email(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
				}
				return
			}
			msg := checkErr(t, "Email("+strconv.Quote(tt.in)+")", err, corral.EINVALID)
			if msg != "invalid email address" {
				t.Errorf("Email(%q) message = %q, want %q", tt.in, msg, "invalid email address")
			}
		})
	}
}

// TestEmailOneAccount: every spelling in a group is one account, and
// different groups are different accounts.
func TestEmailOneAccount(t *testing.T) {
	groups := [][]string{
		{"ÅSA@x.se", "\u00c5sa@x.se", "A\u030asa@x.se", "a\u030aSA@X.SE", "\u212bSA@x.se", " åsa@x.se\t"},
		{"ada@bücher.de", "ADA@BÜCHER.DE", "ada@bu\u0308cher.de", "Ada@BU\u0308CHER.de", "ada@xn--bcher-kva.de", "ADA@XN--BCHER-KVA.DE"},
		{"asa@x.se"},
		{"strasse@x.de", "STRASSE@x.de"},
		{"straße@x.de"},
		// One mailbox: the punycode and Unicode spellings of one domain, and
		// full-width letters, are one account.
		{"victim1@xn--exmple-4nf.com", "victim1@exаmple.com", "VICTIM1@EXАMPLE.COM", "victim1@XN--EXMPLE-4NF.COM"},
		{"victim1@example.com", "ｖｉｃｔｉｍ1@ｅｘａｍｐｌｅ.com", "victim1@ｅｘａｍｐｌｅ．ｃｏｍ"},
	}
	seen := map[string]int{}
	for g, group := range groups {
		for _, in := range group {
			got, err := sanitize.Email(in)
			if err != nil {
				t.Fatalf("Email(%q) = %v", in, err)
			}
			if !norm.NFC.IsNormalString(got) || strings.ToLower(got) != got {
				t.Errorf("Email(%q) = %q, not NFC and lower-case", in, got)
			}
			if again, _ := sanitize.Email(got); again != got {
				t.Errorf("Email(%q) = %q, not idempotent", got, again)
			}
			if prev, ok := seen[got]; ok && prev != g {
				t.Errorf("Email(%q) = %q, the account of group %d", in, got, prev)
			}
			seen[got] = g
		}
	}
	if len(seen) != len(groups) {
		t.Errorf("%d accounts from %d groups: %v", len(seen), len(groups), seen)
	}
}

func TestEmailMixedScript(t *testing.T) {
	tests := []struct {
		in    string
		mixed bool
	}{
		{"victim1@example.com", false},
		{"виктор@пример.рф", false},   // Cyrillic throughout
		{"ada@пример.com", false},     // a Cyrillic label, a Latin one: each is one script
		{"vіctim1@example.com", true}, // a Cyrillic і in a Latin local part
		{"victim1@exаmple.com", true}, // a Cyrillic а in a Latin label
		{"αlpha@example.com", true},   // a Greek α
		{"山田たろう@example.jp", false},   // Han and Hiragana: Japanese
		{"1234@example.com", false},
	}
	for _, tt := range tests {
		if got := sanitize.EmailMixedScript(tt.in); got != tt.mixed {
			t.Errorf("EmailMixedScript(%q) = %v, want %v", tt.in, got, tt.mixed)
		}
	}
}

func TestEmailASCII(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"ASCII", "ada@example.com", ""},
		{"ASCII domain, unicode local part", "über@example.com", ""},
		{"unicode domain", "ada@bücher.de", "ada@xn--bcher-kva.de"},
		{"unicode local part and domain", "über@bücher.de", "über@xn--bcher-kva.de"},
		{"Cyrillic look-alike", "ada@ex\u0430mple.com", "ada@xn--exmple-4nf.com"},
		{"full-width look-alike is not mapped away", "ada@\uff45xample.com", "ada@xn--xample-hy68a.com"},
		{"each label", "ada@例え.テスト", "ada@xn--r8jz45g.xn--zckzah"},
		{"only the non-ASCII label changes", "ada@mail.bücher.de", "ada@mail.xn--bcher-kva.de"},
		{"not an address", "no-at-sign", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sanitize.EmailASCII(tt.in); got != tt.want {
				t.Errorf("EmailASCII(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDisplayName(t *testing.T) {
	tests := []struct {
		name, in, want string // want "" when rejected
	}{
		{"plain", "Ada Lovelace", "Ada Lovelace"},
		{"trimmed", "  Ada Lovelace \t\n", "Ada Lovelace"},
		{"NFC", "E\u0301mile", "\u00c9mile"},
		{"cjk", "李小龙", "李小龙"},
		{"emoji", "Zoë 🚀", "Zoë 🚀"},
		{"100 characters", strings.Repeat("é", 100), strings.Repeat("é", 100)},
		{"101 characters", strings.Repeat("é", 101), ""},
		{"100 after NFC", strings.Repeat("e\u0301", 100), strings.Repeat("é", 100)},
		{"empty", "", ""},
		{"whitespace only", " \u3000\t", ""},
		{"newline inside", "Ada\nLovelace", ""},
		{"NUL", "Ada\x00", ""},
		{"RLO", "Ada\u202Eecalevol", ""},
		{"zero-width", "A\u200Bda", ""},
		{"BOM", "\uFEFFAda", ""},
		{"invalid UTF-8", "Ad\xe1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sanitize.DisplayName(tt.in)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Errorf("DisplayName(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
				}
				return
			}
			checkErr(t, "DisplayName("+strconv.Quote(tt.in)+")", err, corral.EINVALID)
		})
	}
}

func TestPassword(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"eight ASCII", "12345678", true},
		{"passphrase", "correct horse battery staple", true},
		{"eight two-byte characters", "ääääääää", true},
		{"1024 bytes", strings.Repeat("x", 1024), true},
		{"spaces allowed", "        ", true},
		{"seven", "hunter2", false},
		{"seven characters in fourteen bytes", "äääääää", false},
		{"empty", "", false},
		{"1025 bytes", strings.Repeat("y", 1025), false},
		{"NUL", "secret\x00password", false},
		{"invalid UTF-8", "secret\xffpassword", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sanitize.Password(tt.in)
			if tt.ok {
				if err != nil {
					t.Errorf("Password(%q) = %v, want nil", short(tt.in), err)
				}
				return
			}
			checkErr(t, "Password("+short(tt.in)+")", err, corral.EINVALID)
			if tt.in != "" && strings.Contains(err.Error(), tt.in) {
				t.Errorf("Password(%q) error %q contains the password", short(tt.in), err)
			}
		})
	}
}

func TestModelName(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"default", "", true},
		{"simple", "gpt-4o", true},
		{"version tag", "claude-3-5-sonnet@20240620", true},
		{"path", "openrouter/anthropic/claude-3.5", true},
		{"ollama", "llama3:8b", true},
		{"plus and underscore", "A_B+c", true},
		{"200 bytes", strings.Repeat("m", 200), true},
		{"201 bytes", strings.Repeat("m", 201), false},
		{"space", "gpt 4", false},
		{"newline", "gpt-4\n", false},
		{"semicolon", "gpt;rm -rf", false},
		{"quote", `gpt"`, false},
		{"non-ASCII", "modèle", false},
		{"NUL", "gpt\x00", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sanitize.ModelName(tt.in)
			if tt.ok {
				if err != nil || got != tt.in {
					t.Errorf("ModelName(%q) = %q, %v, want %q", tt.in, got, err, tt.in)
				}
				return
			}
			checkErr(t, "ModelName("+strconv.Quote(tt.in)+")", err, corral.EINVALID)
		})
	}
}

// short quotes s for a test message, cut to a readable length.
func short(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:20]) + "...(" + strconv.Itoa(len(s)) + " bytes)"
	}
	return strconv.Quote(s)
}
