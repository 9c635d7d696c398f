// Package archive reads tar, tar.gz and zip archives safely into a
// directory, and writes a directory out as a tar.gz.
//
// Reading is the dangerous half: an archive comes from a person's upload
// and may be hostile. Every entry name goes through the one path validator
// (sanitize.Path); links, devices, FIFOs, duplicates and names that are one
// file on a case-insensitive or normalising file system are refused, naming
// the entry; sizes are counted from the bytes actually decompressed, never
// from what a header declares; and memory stays bounded by the limits (the
// only state kept per entry is its name, for the collision check, and its
// hash, for the caller).
package archive

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"corral"
	"corral/internal/sanitize"
)

// Formats an archive may have.
const (
	Tar   = "tar"
	TarGz = "tar.gz"
	Zip   = "zip"
)

// Default limits of an extraction.
const (
	DefaultMaxBytes     = 1 << 30   // uncompressed bytes of all files together
	DefaultMaxFiles     = 100_000   // regular files
	DefaultMaxDirs      = 100_000   // directories
	DefaultMaxFileSize  = 256 << 20 // uncompressed bytes of one file
	DefaultMaxArchive   = 2 << 30   // bytes of the archive itself (the request body)
	DefaultMaxNameBytes = 32 << 20  // bytes of all entry names together
)

// Limits bound one extraction. A zero field takes its default.
type Limits struct {
	MaxBytes int64 // total uncompressed bytes
	MaxFiles int64 // regular files
	// MaxDirs bounds the directories: entries that carry no data still
	// cost memory and time (a zip's central directory is read whole).
	MaxDirs     int64
	MaxFileSize int64 // uncompressed bytes of one file
	MaxArchive  int64 // bytes of the archive as uploaded
	// MaxNameBytes bounds the names kept for the collision check, so that
	// memory cannot grow with entries that carry no data (directories)
	// or with very long names.
	MaxNameBytes int64
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxDirs <= 0 {
		l.MaxDirs = DefaultMaxDirs
	}
	if l.MaxFileSize <= 0 {
		l.MaxFileSize = DefaultMaxFileSize
	}
	if l.MaxArchive <= 0 {
		l.MaxArchive = DefaultMaxArchive
	}
	if l.MaxNameBytes <= 0 {
		l.MaxNameBytes = DefaultMaxNameBytes
	}
	return l
}

// File is one regular file an extraction wrote.
type File struct {
	Path   string      // slash-separated, as sanitize.Path returns it
	Size   int64       // bytes written
	Mode   fs.FileMode // 0644 or 0755
	SHA256 string      // hex SHA-256 of the content
}

// Result is what an extraction wrote: regular files only (directories
// are implied by their files; an empty directory is not kept).
type Result struct {
	Files []File
	Bytes int64
}

// Detect names the format of an archive from its Content-Type, or, when
// that says nothing known, from its first bytes (head, at least 262 bytes
// when the archive is that long). "" when neither tells.
func Detect(contentType string, head []byte) string {
	ct, _, _ := strings.Cut(strings.ToLower(contentType), ";")
	switch strings.TrimSpace(ct) {
	case "application/x-tar", "application/tar":
		return Tar
	case "application/gzip", "application/x-gzip", "application/x-tar+gzip", "application/x-gtar":
		return TarGz
	case "application/zip", "application/x-zip-compressed":
		return Zip
	}
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return TarGz
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return Zip
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return Tar
	}
	return ""
}

// Sniff reads the first bytes of r for Detect without losing them: it
// returns the format and a reader that yields all of r again.
func Sniff(contentType string, r io.Reader) (string, io.Reader) {
	br := bufio.NewReaderSize(r, 4096)
	head, _ := br.Peek(512)
	return Detect(contentType, head), br
}

// refuse is the 400 for an entry that is not imported, naming it.
func refuse(name, why string) *corral.Error {
	return corral.Errorf(corral.ENAME, "archive entry %q %s; nothing was imported", sanitize.Escape(name), why)
}

// tooLarge is the 413 naming the limit an archive passed.
func tooLarge(format string, args ...any) *corral.Error {
	return corral.Errorf(corral.ETOOLARGE, format+"; nothing was imported", args...)
}

// invalid is the 400 for an archive that cannot be read at all.
func invalid(format string, err error) *corral.Error {
	return &corral.Error{Code: corral.EINVALID, Message: fmt.Sprintf("the archive cannot be read as %s; nothing was imported", format), Err: err}
}
