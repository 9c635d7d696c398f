package backup

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"corral"
)

// maxManifest bounds the manifest read into memory: a million entries
// fit well under it.
const maxManifest = 512 << 20

// refused is the answer to an archive that is not a whole, intact backup.
func refused(file string, format string, args ...any) *corral.Error {
	return corral.Errorf(corral.EINVALID, "%s is not a whole Corral backup: %s", file, fmt.Sprintf(format, args...))
}

// walk reads the archive at file from start to end. Every entry before
// the manifest is checked (its name, its type, that its directory came
// before it) and hashed, and handed to sink when sink is not nil; the
// last entry must be the manifest, and it must list exactly the entries
// read, in order, with their sizes and hashes. A gzip archive is read to
// its end, so that its checksum is checked too.
func walk(file string, sink func(hdr *tar.Header, body io.Reader) error) (Manifest, error) {
	f, err := os.Open(file)
	if err != nil {
		return Manifest{}, corral.Errorf(corral.ENOTFOUND, "cannot read the backup: %v", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return Manifest{}, refused(file, "%v", err)
		}
		r = gz
	}
	tr := tar.NewReader(r)
	var got []Entry
	kinds := map[string]string{} // path: type of the entries read
	var m *Manifest
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Manifest{}, refused(file, "it is cut short or damaged (%v)", err)
		}
		if m != nil {
			return Manifest{}, refused(file, "%q comes after the manifest", hdr.Name)
		}
		if hdr.Name == manifestName && hdr.Typeflag == tar.TypeReg {
			if m, err = readManifest(tr, hdr.Size); err != nil {
				return Manifest{}, refused(file, "its manifest: %v", err)
			}
			continue
		}
		if err := allowed(hdr, kinds); err != nil {
			return Manifest{}, refused(file, "%v", err)
		}
		e := Entry{Path: hdr.Name, Type: kinds[hdr.Name]}
		var body io.Reader
		h := sha256.New()
		if e.Type == typeFile {
			body = io.TeeReader(tr, h)
		}
		if sink != nil {
			if err := sink(hdr, body); err != nil {
				return Manifest{}, err
			}
		}
		switch e.Type {
		case typeFile:
			// What sink left unread is hashed too.
			if _, err := io.Copy(io.Discard, body); err != nil {
				return Manifest{}, refused(file, "%s is cut short or damaged (%v)", hdr.Name, err)
			}
			e.Size, e.SHA256 = hdr.Size, hex.EncodeToString(h.Sum(nil))
		case typeSymlink:
			e.Link = hdr.Linkname
		}
		got = append(got, e)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return Manifest{}, refused(file, "it is cut short or damaged (%v)", err)
	}
	if m == nil {
		return Manifest{}, refused(file, "it has no manifest: it is cut short, or it is not a backup")
	}
	if err := m.matches(got); err != nil {
		return Manifest{}, refused(file, "%v", err)
	}
	return *m, nil
}

func readManifest(r io.Reader, n int64) (*Manifest, error) {
	if n > maxManifest {
		return nil, fmt.Errorf("%d bytes, more than a manifest ever holds", n)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("it is cut short or damaged (%v)", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("it is damaged (%v)", err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("format %q, want %q", m.Format, Format)
	}
	if m.Version != FormatVersion {
		return nil, fmt.Errorf("format version %d: this release reads version %d", m.Version, FormatVersion)
	}
	return &m, nil
}

// matches checks that the manifest lists exactly the entries read.
func (m *Manifest) matches(got []Entry) error {
	for i, want := range m.Files {
		if i >= len(got) {
			return fmt.Errorf("%s is in its manifest but not in the archive (%d entries of %d): it is cut short", want.Path, len(got), len(m.Files))
		}
		if got[i] != want {
			return fmt.Errorf("%s does not match its manifest (%s of %d bytes, sha256 %.12s…; want %s of %d bytes, sha256 %.12s…): it is damaged",
				got[i].Path, got[i].Type, got[i].Size, got[i].SHA256, want.Type, want.Size, want.SHA256)
		}
	}
	if len(got) > len(m.Files) {
		return fmt.Errorf("%s is in the archive but not in its manifest", got[len(m.Files)].Path)
	}
	return nil
}

// allowed checks one entry before anything of it is used: a clean
// relative name among what a backup holds, whose directory is an entry
// before it (so no entry is ever written through a symbolic link), never
// twice, of a type a backup holds there. It records the entry's type in
// kinds.
func allowed(hdr *tar.Header, kinds map[string]string) error {
	name := hdr.Name
	if name == "" || path.Clean(name) != name || path.IsAbs(name) || name == "." || name == ".." || strings.HasPrefix(name, "../") {
		return fmt.Errorf("the entry %q is not a clean relative path", name)
	}
	if _, dup := kinds[name]; dup {
		return fmt.Errorf("%s is in it twice", name)
	}
	top, _, nested := strings.Cut(name, "/")
	if dir := path.Dir(name); nested && kinds[dir] != typeDir {
		return fmt.Errorf("%s comes before its directory %s, or its directory is not one", name, dir)
	}
	var kind string
	switch hdr.Typeflag {
	case tar.TypeReg:
		kind = typeFile
	case tar.TypeDir:
		kind = typeDir
	case tar.TypeSymlink:
		kind = typeSymlink
	default:
		return fmt.Errorf("%s is of tar type %q, which a backup never holds", name, hdr.Typeflag)
	}
	ok := false
	switch top {
	case dbFile, caCertFile:
		ok = !nested && kind == typeFile
	case documentsDir:
		ok = kind == typeDir || (nested && kind == typeFile)
	case workspacesDir:
		ok = kind == typeDir || nested
	}
	if !ok {
		return fmt.Errorf("%s (%s) is not among what a backup holds", name, kind)
	}
	kinds[name] = kind
	return nil
}
