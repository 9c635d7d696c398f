package archive

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Write streams the tree under dir to w as a tar.gz, one file at a time
// (never the whole archive in memory). keep decides, by slash-separated
// path, what goes in; a directory it refuses is not entered. Only regular
// files and directories are written: symbolic links, devices and the like
// are skipped, never followed (each file is opened with O_NOFOLLOW, inside
// an os.Root so nothing outside dir can be reached). Permission bits are
// written as 0644 or 0755 (files keep their x bit), owners as 0, so that
// an archive says nothing of the server's users.
//
// An error after the first byte leaves w holding a truncated archive; the
// caller (an HTTP handler) must make sure the client sees it as broken.
func Write(w io.Writer, dir string, keep func(p string, isDir bool) bool) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	defer root.Close()
	// BestSpeed: the archive is made while the client waits, on a server
	// other people share; size matters less than time.
	gz, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	buf := make([]byte, 256<<10)
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		switch {
		case d.IsDir():
			if !keep(p, true) {
				return fs.SkipDir
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o755, ModTime: info.ModTime()})
		case !d.Type().IsRegular() || !keep(p, false):
			return nil
		}
		return writeFile(tw, root, p, buf)
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// writeFile writes one regular file: its size is taken from the open file,
// and exactly that many bytes are copied (a file replaced meanwhile is
// replaced by rename, so the open one stays whole).
func writeFile(tw *tar.Writer, root *os.Root, p string, buf []byte) error {
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	mode := int64(0o644)
	if info.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
		return err
	}
	if _, err := io.CopyBuffer(tw, io.LimitReader(f, info.Size()), buf); err != nil {
		return fmt.Errorf("archive %s: %w", p, err)
	}
	return nil
}
