package workspace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// node is what a manifest knows of one non-directory of a tree.
type node struct {
	mode   fs.FileMode
	size   int64  // bytes of a regular file; the target's length for a symlink
	sha    string // hex SHA-256 of a regular file's content or a symlink's target; "" otherwise
	target string // a symlink's target
	nlink  uint64
	rdev   uint64
	binary bool // a NUL byte in the first binarySniff bytes
}

// binarySniff is how much of a file decides whether it is binary: a NUL
// byte in it makes the file binary, as git and grep decide.
const binarySniff = 8 << 10

// same reports whether n and o are the same file as far as a change set
// goes: type, permissions, special bits, content (or target, or device).
// Owners and times are not part of a change.
func (n node) same(o node) bool {
	return n.mode == o.mode && n.sha == o.sha && n.size == o.size && n.rdev == o.rdev
}

// manifestEntry is the entry for one change of path p. old is nil for a
// create, cur nil for a delete. secret says p is hidden from runs: a write
// there is protected whatever the policy (see Classify).
func manifestEntry(p, op string, old, cur *node, secret bool) Entry {
	e := Entry{Path: p, Op: op}
	if old != nil {
		e.OldSHA256, e.OldMode = old.sha, old.mode
	}
	if cur != nil {
		e.NewSHA256, e.Size, e.Mode = cur.sha, cur.size, cur.mode
		e.Flags = nodeFlags(p, *cur)
		if cur.binary {
			e.Class = ClassRisky
		}
		if secret {
			e.Class = ClassProtected
		}
	} else if internalPath(p) {
		e.Flags = []string{FlagInternal}
	}
	return e
}

// nodeFlags are the facts about a new file that make it protected.
func nodeFlags(p string, n node) []string {
	var flags []string
	switch t := n.mode.Type(); {
	case t == fs.ModeSymlink:
		flags = append(flags, FlagSymlink)
	case t&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeIrregular) != 0:
		flags = append(flags, FlagDevice)
	case t == 0 && n.nlink > 1:
		flags = append(flags, FlagHardlink)
	}
	if n.mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
		flags = append(flags, FlagSetuid)
	}
	if !cleanRelPath(p) {
		flags = append(flags, FlagEscape)
	} else if n.mode.Type() == fs.ModeSymlink && n.target != "" && targetEscapes(p, n.target) {
		flags = append(flags, FlagEscape)
	}
	if internalPath(p) {
		flags = append(flags, FlagInternal)
	}
	return flags
}

// targetEscapes reports whether a symlink at p pointing at target would
// lead out of the workspace: an absolute target, or one that climbs above
// the root.
func targetEscapes(p, target string) bool {
	if strings.HasPrefix(target, "/") {
		return true
	}
	t := path.Join(path.Dir(p), target)
	return t == ".." || strings.HasPrefix(t, "../")
}

// hashContent hashes r to its end, noting whether it looks binary.
func hashContent(r io.Reader) (sum string, n int64, binary bool, err error) {
	h := sha256.New()
	buf := make([]byte, 64<<10)
	for {
		k, rerr := r.Read(buf)
		if k > 0 {
			if n < binarySniff {
				head := buf[:min(k, int(binarySniff-n))]
				binary = binary || bytes.IndexByte(head, 0) >= 0
			}
			h.Write(buf[:k])
			n += int64(k)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", n, false, rerr
		}
	}
	return hex.EncodeToString(h.Sum(nil)), n, binary, nil
}

func hashString(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func sortManifest(m Manifest) {
	sort.Slice(m, func(i, j int) bool { return m[i].Path < m[j].Path })
}

// relSlash is name relative to root, slash-separated.
func relSlash(root, name string) (string, error) {
	rel, err := filepath.Rel(root, name)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// joinRel joins a slash-separated relative directory and a name.
func joinRel(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}
