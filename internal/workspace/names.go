package workspace

import (
	"encoding/base64"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"corral/internal/sanitize"
)

// Names in a manifest.
//
// An agent can create any name the kernel allows; a person can only upload
// names sanitize.Path accepts. Every element of every changed path goes
// through the same validator here: an entry that fails it is flagged
// FlagName (protected: never applied) with the rule named in its note, so
// a name the files API would refuse can never reach the workspace by way
// of a run. Paths that are one file where names are folded (macOS,
// Windows: case, Unicode normalisation) are flagged FlagCollision (risky).

// flagNames flags, in place, the entries of m whose names break the path
// rules or collide. existing lists the names in a directory of the
// persistent workspace ("" is the root; nil, nil for a directory that is
// not there), for creates that would collide with a file already there.
func flagNames(m Manifest, existing func(dir string) ([]string, error)) error {
	for i := range m {
		if rule, why := sanitize.StoredPath(m[i].Path); rule != "" {
			addFlag(&m[i], FlagName, why)
		}
	}
	// Among the entries: every prefix of every path that stays, by its
	// folded form.
	byFold := map[string][]string{}
	for _, e := range m {
		if e.Op == OpDelete {
			continue
		}
		for p := e.Path; p != "."; p = path.Dir(p) {
			f := sanitize.Fold(p)
			if !slices.Contains(byFold[f], p) {
				byFold[f] = append(byFold[f], p)
			}
		}
	}
	for i, e := range m {
		if e.Op == OpDelete {
			continue
		}
		for p := e.Path; p != "."; p = path.Dir(p) {
			if others := byFold[sanitize.Fold(p)]; len(others) > 1 {
				other := others[0]
				if other == p {
					other = others[1]
				}
				addFlag(&m[i], FlagCollision, "collides with "+sanitize.Escape(other)+
					" in this change set where file names ignore case or Unicode normalisation")
				break
			}
		}
	}
	// With what the workspace has: a create whose name, at some level,
	// folds to another name in the same directory.
	for i, e := range m {
		if e.Op != OpCreate || existing == nil {
			continue
		}
		dir := ""
		for _, el := range strings.Split(e.Path, "/") {
			names, err := existing(dir)
			if err != nil {
				return err
			}
			found, exact := "", false
			for _, n := range names {
				if n == el {
					exact = true
				} else if found == "" && sanitize.Fold(n) == sanitize.Fold(el) {
					found = n
				}
			}
			if found != "" {
				addFlag(&m[i], FlagCollision, "collides with "+sanitize.Escape(joinRel(dir, found))+
					" in the workspace where file names ignore case or Unicode normalisation")
				break
			}
			if !exact {
				break // nothing deeper exists to collide with
			}
			dir = joinRel(dir, el)
		}
	}
	return nil
}

// addFlag adds flag and its note to e, once.
func addFlag(e *Entry, flag, note string) {
	if slices.Contains(e.Flags, flag) {
		return
	}
	e.Flags = append(e.Flags, flag)
	if e.Note == "" {
		e.Note = note
	} else {
		e.Note += "; " + note
	}
}

// protecting reports whether a flag makes its entry protected. Every flag
// does but FlagCollision, which makes it risky: the two files are
// distinct here and a person may want both.
func protecting(flag string) bool { return flag != FlagCollision }

// hasProtectingFlag reports whether any of flags makes an entry protected.
func hasProtectingFlag(flags []string) bool {
	return slices.ContainsFunc(flags, protecting)
}

// entryJSON is how an Entry is recorded in a stage's manifest. JSON
// strings are UTF-8: a path that is not valid UTF-8 would come back with
// U+FFFD in place of its bytes, a different name than the one on disk, so
// such a path is also recorded as its bytes.
type entryJSON struct {
	entryFields
	PathBytes string `json:"PathBytes,omitempty"` // base64 of the path's bytes, when not valid UTF-8
}

type entryFields Entry // Entry's fields, without its methods

// MarshalJSON records the path losslessly.
func (e Entry) MarshalJSON() ([]byte, error) {
	j := entryJSON{entryFields: entryFields(e)}
	if !utf8.ValidString(e.Path) {
		j.PathBytes = base64.StdEncoding.EncodeToString([]byte(e.Path))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (e *Entry) UnmarshalJSON(b []byte) error {
	var j entryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Entry(j.entryFields)
	if j.PathBytes != "" {
		raw, err := base64.StdEncoding.DecodeString(j.PathBytes)
		if err != nil {
			return err
		}
		e.Path = string(raw)
	}
	return nil
}
