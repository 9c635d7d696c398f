package archive

import (
	"archive/tar"
	"archive/zip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/klauspost/pgzip"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"strings"

	"corral"
	"corral/internal/sanitize"
)

// Extract reads an archive of format (Tar, TarGz or Zip) from r and writes
// its regular files under dst, an empty directory the caller made and
// removes. A zip needs random access, so it is first spooled to a file in
// spoolDir (removed before Extract returns), bounded by MaxArchive; a tar
// is read as a stream.
//
// Any refused entry or passed limit stops the extraction at once with a
// *corral.Error naming it (ENAME for a refused entry, ETOOLARGE for a
// limit, EINVALID for an archive that cannot be read); what was written
// under dst until then is the caller's to remove. Permission bits are
// reduced to 0644 or 0755 (the x bit is kept): setuid, setgid and sticky
// bits are dropped rather than refused, since they mean nothing in a
// workspace whose files all belong to the sandbox's user, and refusing
// them would turn away honest archives made by root.
func Extract(r io.Reader, format, dst, spoolDir string, lim Limits) (Result, error) {
	lim = lim.WithDefaults()
	root, err := os.OpenRoot(dst)
	if err != nil {
		return Result{}, corral.Internal("archive.Extract", err)
	}
	defer root.Close()
	x := newExtractor(root, lim, 256<<10)
	switch format {
	case Tar, TarGz:
		err = x.tar(&bodyReader{r: r, left: lim.MaxArchive, limit: lim.MaxArchive}, format == TarGz)
	case Zip:
		err = x.zip(r, spoolDir)
	default:
		err = corral.Errorf(corral.EINVALID, "the body is not a tar, tar.gz or zip archive (say so with Content-Type application/x-tar, application/gzip or application/zip)")
	}
	if err != nil {
		return Result{}, err
	}
	return x.res, nil
}

// bodyReader counts the archive's own bytes against MaxArchive.
type bodyReader struct {
	r           io.Reader
	left, limit int64
}

var errBodyTooLarge = errors.New("archive larger than its limit")

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, errBodyTooLarge
		}
		return b.r.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// What the collision check keeps of one name, besides the name: flags.
const (
	nameDir      uint8 = 1 << iota // a directory
	nameExplicit                   // an entry of its own, not only the parent of one
)

type extractor struct {
	root *os.Root
	lim  Limits
	// names holds every path seen, by sanitize.Fold of it, with its
	// flags and, when it differs, its spelling (see nameSet).
	names     *nameSet
	nameBytes int64
	dirs      int64 // directory entries seen
	res       Result
	buf       []byte
}

// newExtractor writes under root within lim, copying through a buffer of
// bufSize bytes.
func newExtractor(root *os.Root, lim Limits, bufSize int) *extractor {
	return &extractor{root: root, lim: lim, names: newNameSet(), buf: make([]byte, bufSize)}
}

func (x *extractor) tar(body *bodyReader, gz bool) error {
	var r io.Reader = body
	format := "tar"
	if gz {
		format = "tar.gz"
		// pgzip decompresses ahead in a goroutine of its own, in at most
		// four blocks of 256 KiB, as tar -xz gets from running gzip as
		// another process: inflating then overlaps creating the files
		// (inline, it was a fifth of an import's time). Its default, four
		// blocks of 1 MiB, inflated no faster and made 3 MiB more of live
		// heap, which the garbage collector's pacing doubles: a third of
		// what a hostile archive's peak held above a benign one's.
		zr, err := pgzip.NewReaderN(body, 256<<10, 4)
		if err != nil {
			return x.readError(format, err, body)
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return x.readError(format, err, body)
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeReg, '\x00', tar.TypeGNUSparse:
			err := x.file(h.Name, mode, h.Size, func() (io.Reader, func(), error) { return tr, func() {}, nil })
			var ce *corral.Error
			if err != nil && !errors.As(err, &ce) {
				return x.readError(format, err, body)
			}
			if err != nil {
				return err
			}
		case tar.TypeDir:
			if err := x.dir(h.Name); err != nil {
				return err
			}
		case tar.TypeSymlink, tar.TypeLink:
			return refuse(h.Name, "is a link; links are not imported")
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			return refuse(h.Name, "is a device or a FIFO; only regular files and directories are imported")
		case tar.TypeXGlobalHeader:
			// Archive-wide metadata (git archive writes one): no file.
		default:
			return refuse(h.Name, fmt.Sprintf("has a type Corral does not import (%q)", h.Typeflag))
		}
	}
}

// readError reports an unreadable archive, or the body limit when that is
// what stopped the read.
func (x *extractor) readError(format string, err error, body *bodyReader) error {
	if errors.Is(err, errBodyTooLarge) {
		return tooLarge("the archive is larger than the %d-byte limit", x.lim.MaxArchive)
	}
	return invalid(format, err)
}

func (x *extractor) zip(r io.Reader, spoolDir string) error {
	if err := os.MkdirAll(spoolDir, 0o700); err != nil {
		return corral.Internal("archive spool", err)
	}
	f, err := os.CreateTemp(spoolDir, "spool-*.zip")
	if err != nil {
		return corral.Internal("archive spool", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	n, err := io.CopyBuffer(f, io.LimitReader(r, x.lim.MaxArchive+1), x.buf)
	if err != nil {
		return invalid("zip", err)
	}
	if n > x.lim.MaxArchive {
		return tooLarge("the archive is larger than the %d-byte limit", x.lim.MaxArchive)
	}
	// The central directory is read whole into memory by archive/zip: bound
	// it by what the limits allow before letting it.
	if err := x.checkDirectory(f, n); err != nil {
		return err
	}
	zr, err := zip.NewReader(f, n)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return invalid("zip", err)
	}
	for _, e := range zr.File {
		mode := e.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			return refuse(e.Name, "is a link; links are not imported")
		case mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0:
			return refuse(e.Name, "is a device, FIFO or socket; only regular files and directories are imported")
		case mode.IsDir() || strings.HasSuffix(e.Name, "/"):
			if err := x.dir(e.Name); err != nil {
				return err
			}
		case mode.Type() != 0:
			return refuse(e.Name, "is not a regular file or a directory")
		default:
			declared := int64(math.MaxInt64)
			if e.UncompressedSize64 < math.MaxInt64 {
				declared = int64(e.UncompressedSize64)
			}
			open := func() (io.Reader, func(), error) {
				rc, err := e.Open()
				if err != nil {
					return nil, nil, err
				}
				return rc, func() { rc.Close() }, nil
			}
			err := x.file(e.Name, mode.Perm(), declared, open)
			var ce *corral.Error
			if err != nil && !errors.As(err, &ce) {
				// archive/zip stops at the declared size and checks the
				// CRC: a lying entry ends here.
				return &corral.Error{Code: corral.EINVALID, Err: err,
					Message: fmt.Sprintf("archive entry %q is damaged or holds other bytes than its header declares; nothing was imported", sanitize.Escape(e.Name))}
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDirectory reads the zip's end-of-central-directory record and
// refuses a directory larger than any archive within the limits could
// have (each entry at most 46 bytes plus its name and extras).
func (x *extractor) checkDirectory(f *os.File, size int64) error {
	const eocdLen = 22
	tail := int64(eocdLen + 65535)
	if tail > size {
		tail = size
	}
	b := make([]byte, tail)
	if _, err := f.ReadAt(b, size-tail); err != nil && err != io.EOF {
		return invalid("zip", err)
	}
	i := strings.LastIndex(string(b), "PK\x05\x06")
	if i < 0 || len(b)-i < eocdLen {
		return invalid("zip", errors.New("no end of central directory"))
	}
	records := int64(binary.LittleEndian.Uint16(b[i+10:]))
	dirSize := int64(binary.LittleEndian.Uint32(b[i+12:]))
	if records == 0xffff || dirSize == 0xffffffff {
		// Zip64: the real counts are in the zip64 record the locator
		// just before points to.
		if i < 20 || string(b[i-20:i-16]) != "PK\x06\x07" {
			return invalid("zip", errors.New("zip64 locator missing"))
		}
		off := int64(binary.LittleEndian.Uint64(b[i-20+8:]))
		var rec [56]byte
		if off < 0 || off > size-56 {
			return invalid("zip", errors.New("zip64 record out of range"))
		}
		if _, err := f.ReadAt(rec[:], off); err != nil || string(rec[:4]) != "PK\x06\x06" {
			return invalid("zip", errors.New("bad zip64 record"))
		}
		records = int64(binary.LittleEndian.Uint64(rec[32:]) & math.MaxInt64)
		dirSize = int64(binary.LittleEndian.Uint64(rec[40:]) & math.MaxInt64)
	}
	// Every record is a file or a directory, each kind bounded: the
	// records archive/zip would hold in memory are counted before it reads
	// one. Extras are allowed 1 KiB an entry.
	maxRecords := x.lim.MaxFiles + x.lim.MaxDirs
	if records > maxRecords || dirSize > maxRecords*(46+1024)+x.lim.MaxNameBytes {
		return tooLarge("the archive holds more than %d entries (at most %d files and %d directories)", maxRecords, x.lim.MaxFiles, x.lim.MaxDirs)
	}
	return nil
}

// cleanName strips what archivers put around a name ("./" in front, "/"
// after a directory) and validates the rest. ok is false for the root.
func cleanName(name string) (string, bool, error) {
	n := strings.TrimPrefix(name, "./")
	n = strings.TrimSuffix(n, "/")
	if n == "" || n == "." {
		return "", false, nil
	}
	p, err := sanitize.Path(n)
	if err != nil {
		return "", false, refuse(name, "is refused: "+corral.ErrorMessage(err))
	}
	return p, true, nil
}

// claim records p (a file or a directory) for the duplicate, collision
// and file-versus-directory checks, with its parents as directories.
func (x *extractor) claim(name, p string, dir bool) error {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		fd := sanitize.Fold(d)
		flags, spelling, ok := x.seen(fd)
		switch {
		case !ok:
			if err := x.remember(fd, d, nameDir); err != nil {
				return err
			}
			continue
		case flags&nameDir == 0:
			return refuse(name, fmt.Sprintf("is inside %q, which is a file in the archive", sanitize.Escape(spelling)))
		case spelling != d:
			return refuse(name, fmt.Sprintf("has a directory that is one with %q on a case-insensitive or normalising file system", sanitize.Escape(spelling)))
		}
		break
	}
	want := nameExplicit
	if dir {
		want |= nameDir
	}
	fp := sanitize.Fold(p)
	flags, spelling, ok := x.seen(fp)
	if !ok {
		return x.remember(fp, p, want)
	}
	switch {
	case spelling != p:
		return refuse(name, fmt.Sprintf("is one file with %q on a case-insensitive or normalising file system", sanitize.Escape(spelling)))
	case flags&nameDir != want&nameDir:
		return refuse(name, "is both a file and a directory in the archive")
	case flags&nameExplicit != 0:
		return refuse(name, "appears twice in the archive")
	}
	x.names.setFlags(fp, flags|nameExplicit)
	return nil
}

// seen returns the flags and the spelling of the path that folds to
// folded, if one was seen.
func (x *extractor) seen(folded string) (flags uint8, spelling string, ok bool) {
	return x.names.get(folded)
}

// remember keeps one name, within MaxNameBytes (counted as if both its
// forms were kept, as they once were: the limit means what it meant).
func (x *extractor) remember(folded, name string, flags uint8) error {
	x.nameBytes += int64(len(folded) + len(name))
	if x.nameBytes > x.lim.MaxNameBytes {
		return tooLarge("the archive's names are longer than the %d-byte limit in all", x.lim.MaxNameBytes)
	}
	x.names.add(folded, name, flags)
	return nil
}

func (x *extractor) dir(name string) error {
	if x.dirs++; x.dirs > x.lim.MaxDirs {
		return tooLarge("the archive holds more than %d directories", x.lim.MaxDirs)
	}
	p, ok, err := cleanName(name)
	if err != nil || !ok {
		return err
	}
	return x.claim(name, p, true)
}

// file checks and writes one regular file. declared is the size the
// header gives: over a limit, the entry is refused before a byte is read;
// under it, only the bytes actually read count.
func (x *extractor) file(name string, perm fs.FileMode, declared int64, open func() (io.Reader, func(), error)) error {
	p, ok, err := cleanName(name)
	if err != nil {
		return err
	}
	if !ok {
		return refuse(name, "is not a file name")
	}
	if int64(len(x.res.Files)) >= x.lim.MaxFiles {
		return tooLarge("the archive holds more than %d files", x.lim.MaxFiles)
	}
	if declared > x.lim.MaxFileSize {
		return tooLarge("archive entry %q is larger than the %d-byte limit on one file", sanitize.Escape(name), x.lim.MaxFileSize)
	}
	if declared > x.lim.MaxBytes-x.res.Bytes {
		return tooLarge("the archive holds more than %d bytes", x.lim.MaxBytes)
	}
	if err := x.claim(name, p, false); err != nil {
		return err
	}
	if d := path.Dir(p); d != "." {
		if err := x.root.MkdirAll(d, 0o700); err != nil {
			return corral.Internal("archive.Extract", err)
		}
	}
	f, err := x.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return corral.Internal("archive.Extract", err)
	}
	defer f.Close()
	r, done, err := open()
	if err != nil {
		return err
	}
	defer done()
	limit := min(x.lim.MaxFileSize, x.lim.MaxBytes-x.res.Bytes)
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(f, h), io.LimitReader(r, limit+1), x.buf)
	if err != nil {
		return err
	}
	if n > limit {
		if n > x.lim.MaxFileSize {
			return tooLarge("archive entry %q is larger than the %d-byte limit on one file", sanitize.Escape(name), x.lim.MaxFileSize)
		}
		return tooLarge("the archive holds more than %d bytes", x.lim.MaxBytes)
	}
	if err := f.Close(); err != nil {
		return corral.Internal("archive.Extract", err)
	}
	mode := fs.FileMode(0o644)
	if perm&0o111 != 0 {
		mode = 0o755
	}
	x.res.Files = append(x.res.Files, File{Path: p, Size: n, Mode: mode, SHA256: hex.EncodeToString(h.Sum(nil))})
	x.res.Bytes += n
	return nil
}
