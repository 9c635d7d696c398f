package backup

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"corral"
	"corral/internal/store"
)

// RestoreOptions are what Restore needs.
type RestoreOptions struct {
	From string // the archive
	Data string // the data directory to restore into: absent or empty; absolute
	// Lock takes the data directory's lock, the one a server takes, and
	// returns its release: no server starts on the directory while it is
	// being restored. lockFile is the name of the file it makes there.
	Lock     func(dir string) (release func(), err error)
	LockFile string
	Progress io.Writer // where progress lines go; nil for nowhere
	Now      func() time.Time
}

// Restored is what a restore wrote and found.
type Restored struct {
	Manifest Manifest     // what the backup says it holds
	Schema   int64        // the restored database's schema version: this release's
	Census   store.Census // what the restored database holds, migrated
	// Expired are the change sets that were pending in the backup: their
	// staged trees are never in one, so they are expired, never applied.
	Expired        int
	DocumentStores int64
	Documents      int64
	Traces         Traces // Broken: the first break, "" when every chain verifies
}

// Restore checks the archive at opt.From whole against its manifest, then
// writes it into opt.Data, which must be absent or empty, under the data
// directory's lock; it opens the database as the server does (migrating a
// backup of an older release), expires the change sets that were pending,
// and verifies every trace chain. A break is no error: it is in
// Restored.Traces, and what was written stays for a person to look at.
func Restore(ctx context.Context, opt RestoreOptions) (Restored, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if err := empty(opt.Data, ""); err != nil {
		return Restored{}, err
	}
	p := newProgress(opt.Progress, opt.Now)
	m, err := walk(opt.From, nil)
	if err != nil {
		return Restored{}, note(err, "nothing was written")
	}
	if m.Schema > store.SchemaVersion() {
		return Restored{}, corral.Errorf(corral.EINVALID, "the backup was made by a newer release (corral %s, schema version %d; this release's is %d): restore it with that release or a later one; nothing was written",
			m.CorralVersion, m.Schema, store.SchemaVersion())
	}
	p.step("%s checked against its manifest: %d entries", opt.From, len(m.Files))

	if err := os.MkdirAll(opt.Data, 0o711); err != nil {
		return Restored{}, corral.Internal("restore", err)
	}
	release, err := opt.Lock(opt.Data)
	if err != nil {
		return Restored{}, err
	}
	defer release()
	if err := empty(opt.Data, opt.LockFile); err != nil {
		return Restored{}, err
	}
	if err := extract(opt.From, opt.Data, p); err != nil {
		return Restored{}, note(err, "the backup changed while it was restored: remove "+opt.Data+" before trying again")
	}
	p.done(p.bytes)
	r := Restored{Manifest: m, Schema: store.SchemaVersion()}
	if err := r.open(ctx, opt.Data); err != nil {
		return r, err
	}
	syscall.Sync()
	return r, nil
}

// empty refuses a data directory that holds anything but the lock file
// named (when not "").
func empty(dir, lockFile string) error {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return corral.Errorf(corral.EINVALID, "the data directory %s: %v", dir, err)
	}
	for _, de := range des {
		if de.Name() != lockFile || lockFile == "" {
			return corral.Errorf(corral.ECONFLICT, "the data directory %s is not empty (it holds %s): restore into a new or empty directory", dir, de.Name())
		}
	}
	return nil
}

// open opens the restored database as a server does, expires what was
// pending, counts what it holds and verifies its traces, then counts the
// documents of each restored store.
func (r *Restored) open(ctx context.Context, data string) error {
	db, err := store.Open(ctx, filepath.Join(data, dbFile))
	if err != nil {
		return err
	}
	defer db.Close()
	if r.Expired, err = expirePending(ctx, db); err != nil {
		return err
	}
	if r.Census, err = db.Census(ctx); err != nil {
		return err
	}
	r.Traces.Events, r.Traces.Chains, err = verifyTraces(ctx, db)
	if err != nil {
		var e *corral.Error
		if errors.As(err, &e) && e.Code == corral.EINTERNAL {
			return err
		}
		r.Traces.Broken = err.Error()
	}
	stores := []documentStore{libraryStore()}
	for _, id := range r.Census.AgentIDs {
		stores = append(stores, agentStore(id))
	}
	for _, s := range stores {
		p := filepath.Join(data, filepath.FromSlash(s.path))
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		n, err := countDocuments(ctx, p, s.owner)
		if err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		r.DocumentStores++
		r.Documents += n
	}
	return nil
}

// expirePending expires every pending change set, as the server does one
// nobody decided in time: its staged tree is not in the backup, so it can
// never be applied, and a person sees it expired rather than failing.
func expirePending(ctx context.Context, db *store.DB) (int, error) {
	pending, err := db.PendingChangeSets(ctx)
	if err != nil {
		return 0, err
	}
	for _, cs := range pending {
		if err := db.UpdateChangeSet(ctx, cs.Expired(), corral.ChangePending); err != nil {
			return 0, err
		}
	}
	return len(pending), nil
}

// extract writes the archive into data, through an os.Root so that no
// name can reach outside it, checking it against its manifest once more
// as it goes (the file could have changed since it was checked).
// Directories are made private first and given their modes and times last,
// once everything under them is written. Set-id and sticky bits are never
// restored; owners are, when this process may set them.
func extract(file, data string, p *progress) error {
	root, err := os.OpenRoot(data)
	if err != nil {
		return corral.Internal("restore", err)
	}
	defer root.Close()
	chown := os.Geteuid() == 0
	var dirs []*tar.Header
	_, err = walk(file, func(hdr *tar.Header, body io.Reader) error {
		name := hdr.Name
		perm := fs.FileMode(hdr.Mode).Perm()
		owned := chown && strings.HasPrefix(name, workspacesDir+"/")
		switch hdr.Typeflag {
		case tar.TypeDir:
			dirs = append(dirs, hdr)
			return root.Mkdir(name, 0o700)
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
			if owned {
				return root.Lchown(name, hdr.Uid, hdr.Gid)
			}
			return nil
		}
		f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		n, err := io.Copy(f, body)
		p.bytes += n
		p.written(p.bytes)
		if err == nil && name == dbFile {
			err = f.Sync()
		}
		if err == nil {
			err = f.Chmod(perm)
		}
		if err == nil && owned {
			err = f.Chown(hdr.Uid, hdr.Gid)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	})
	if err != nil {
		var e *corral.Error
		if errors.As(err, &e) {
			return err
		}
		return corral.Internal("restore", err)
	}
	for _, hdr := range slices.Backward(dirs) {
		name := hdr.Name
		err := root.Chmod(name, fs.FileMode(hdr.Mode).Perm())
		if err == nil && chown && strings.HasPrefix(name, workspacesDir+"/") {
			err = root.Lchown(name, hdr.Uid, hdr.Gid)
		}
		if err == nil {
			err = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
		}
		if err != nil {
			return corral.Internal("restore", fmt.Errorf("%s: %w", path.Clean(name), err))
		}
	}
	return nil
}

// note adds a sentence to the message of a *corral.Error.
func note(err error, sentence string) error {
	var e *corral.Error
	if errors.As(err, &e) && e.Code != corral.EINTERNAL {
		return &corral.Error{Code: e.Code, Message: e.Message + "; " + sentence, Err: e.Err}
	}
	return err
}
