package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"corral"
)

// hiddenWorkspace makes a workspace owned by uid:gid inside a directory
// that only root can enter (0700), so the sandbox's user (65534) could not
// reach it along its path. The workspace holds note.txt (its owner's, 0600)
// and other.txt (uid 4321's, 0600).
func hiddenWorkspace(t *testing.T, uid, gid int) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.Chmod(root, 0o700))
	dir := filepath.Join(root, "project")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.Chmod(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "note.txt"), []byte("the owner's note\n"), 0o600))
	must(t, os.Chown(filepath.Join(dir, "note.txt"), uid, gid))
	must(t, os.WriteFile(filepath.Join(dir, "other.txt"), []byte("someone else's\n"), 0o600))
	must(t, os.Chown(filepath.Join(dir, "other.txt"), 4321, 4321))
	must(t, os.Chown(dir, uid, gid))
	return dir
}

// owner is the host owner of path, not following a symbolic link.
func owner(t *testing.T, path string) string {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(path, &st))
	return fmt.Sprintf("%d:%d", st.Uid, st.Gid)
}

// runIn runs script in a sandbox on dir and returns its exit code and output.
func runIn(t *testing.T, dir, mode, script string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	res, err := Run(Config{}, Spec{Workspace: dir, Mode: mode, Env: testEnv, Command: []string{"/bin/sh", "-c", script}}, nil, &out, &out)
	if err != nil {
		t.Fatalf("Run(%s, %q): %v", dir, script, err)
	}
	return res.ExitCode, out.String()
}

func TestIdmapWorkspaceKeepsItsOwner(t *testing.T) {
	needSandbox(t)
	const write = `set -e; echo x > f; mkdir d; ln -s f l; mkdir -p d/e; echo y > d/e/g
stat -c '%u:%g' . f d l note.txt; grep -c idmapped /proc/self/mountinfo || true`
	tests := []struct {
		name     string
		uid, gid int
		idmapped bool
	}{
		{"root's", 0, 0, true},
		{"another user's", 1234, 1234, true},
		{"uid and gid differ", 1234, 5678, true},
		{"the sandbox user's but its group differs", 65534, 0, true},
		// The sandbox's own (a staged tree), but unreachable: opened by the
		// server, not idmapped.
		{"the sandbox user's, unreachable", 65534, 65534, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := hiddenWorkspace(t, tt.uid, tt.gid)
			code, out := runIn(t, dir, ReadWrite, write)
			// Inside, the owner's files are the sandbox user's.
			inside := "1000:1000\n1000:1000\n1000:1000\n1000:1000\n1000:1000\n"
			n := "0"
			if tt.idmapped {
				n = "1"
			}
			if code != 0 || out != inside+n+"\n" {
				t.Fatalf("in %d:%d: exit %d, output %q; want 0, %q", tt.uid, tt.gid, code, out, inside+n+"\n")
			}
			want := fmt.Sprintf("%d:%d", tt.uid, tt.gid)
			for _, p := range []string{".", "f", "d", "l", "d/e", "d/e/g"} {
				if got := owner(t, filepath.Join(dir, p)); got != want {
					t.Errorf("%s is %s on the host, want %s like its workspace", p, got, want)
				}
			}
			if b, err := os.ReadFile(filepath.Join(dir, "d/e/g")); err != nil || string(b) != "y\n" {
				t.Errorf("d/e/g = %q, %v", b, err)
			}
		})
	}
}

func TestIdmapWorkspaceAsItsOwnerOnly(t *testing.T) {
	needSandbox(t)
	dir := hiddenWorkspace(t, 0, 0)
	tests := []struct {
		name, mode, script string
		code               int
		out                string
	}{
		{"reads the owner's 0600 file", ReadOnly, "cat note.txt", 0, "the owner's note\n"},
		{"lists it", ReadOnly, "ls", 0, "note.txt\nother.txt\n"},
		{"read-only stays read-only", ReadOnly, "(echo x > f) 2>/dev/null || echo refused; chmod 777 note.txt 2>/dev/null || echo refused", 0, "refused\nrefused\n"},
		// Other ids have no mapping: nobody inside, their modes apply.
		{"another uid's file shows as nobody", ReadWrite, "stat -c '%u:%g' other.txt", 0, "65534:65534\n"},
		{"another uid's 0600 file stays closed", ReadWrite, "cat other.txt 2>/dev/null || echo refused", 0, "refused\n"},
		{"no chown to another id", ReadWrite, "chown 0:0 note.txt 2>/dev/null || echo refused; chown 1000:0 note.txt 2>/dev/null || echo refused", 0, "refused\nrefused\n"},
		{"no capability for it", ReadWrite, "grep CapEff /proc/self/status", 0, "CapEff:\t0000000000000000\n"},
		{"nosuid", ReadWrite, "grep ' /workspace ' /proc/self/mountinfo | grep -c nosuid", 0, "1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := runIn(t, dir, tt.mode, tt.script)
			if code != tt.code || out != tt.out {
				t.Fatalf("%q: exit %d, output %q; want %d, %q", tt.script, code, out, tt.code, tt.out)
			}
		})
	}
	// Nothing of the tree changed owner.
	for _, p := range []string{".", "note.txt"} {
		if got := owner(t, filepath.Join(dir, p)); got != "0:0" {
			t.Errorf("%s is %s, want 0:0", p, got)
		}
	}
	if got := owner(t, filepath.Join(dir, "other.txt")); got != "4321:4321" {
		t.Errorf("other.txt is %s, want 4321:4321", got)
	}
}

// TestIdmapWorkspaceIsPrivate: a clone of a shared mount would be a peer of
// the host's, and mounts would propagate between host and sandbox.
func TestIdmapWorkspaceIsPrivate(t *testing.T) {
	needSandbox(t)
	shared := t.TempDir()
	must(t, unix.Mount(shared, shared, "", unix.MS_BIND, ""))
	t.Cleanup(func() { unix.Unmount(shared, unix.MNT_DETACH) })
	must(t, unix.Mount("", shared, "", unix.MS_SHARED, ""))
	dir := filepath.Join(shared, "project")
	must(t, os.Mkdir(dir, 0o755))
	code, out := runIn(t, dir, ReadWrite, "grep ' /workspace ' /proc/self/mountinfo")
	if code != 0 || !strings.Contains(out, "idmapped") || strings.Contains(out, "shared:") || strings.Contains(out, "master:") {
		t.Fatalf("/workspace in the sandbox's mountinfo: exit %d, %q; want idmapped, neither shared nor a slave", code, out)
	}
}

func TestIdmapRefusesBeforeStarting(t *testing.T) {
	needSandbox(t)
	// ramfs cannot be idmapped (no FS_ALLOW_IDMAP) on any kernel so far.
	ram := t.TempDir()
	// Every kernel has ramfs: failing to mount it is a broken machine, not
	// a missing feature.
	if err := unix.Mount("corral-test", ram, "ramfs", 0, "mode=0700"); err != nil {
		t.Fatalf("mount ramfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(ram, unix.MNT_DETACH) })
	rootOwned := filepath.Join(ram, "root-owned")
	must(t, os.Mkdir(rootOwned, 0o755))
	sandboxOwned := filepath.Join(ram, "sandbox-owned")
	must(t, os.Mkdir(sandboxOwned, 0o755))
	must(t, os.Chown(sandboxOwned, 65534, 65534))
	must(t, os.Chmod(ram, 0o755))
	closed := hiddenWorkspace(t, 0, 0)
	must(t, os.Chmod(closed, 0o555))

	tests := []struct {
		name, dir, mode string
		code            string
		want            []string // in the message
	}{
		{"a filesystem that cannot idmap", rootOwned, ReadWrite, corral.EUNAVAIL,
			[]string{rootOwned, "owned by 0:0", "filesystem (ramfs) cannot be idmapped", "Linux ", "chown -R 65534:65534"}},
		{"read-only too", rootOwned, ReadOnly, corral.EUNAVAIL, []string{"(ramfs) cannot be idmapped"}},
		{"not writable by its owner", closed, ReadWrite, corral.EINVALID, []string{"not writable by its owner (mode 0555)", "chmod u+rwx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(Config{}, Spec{Workspace: tt.dir, Mode: tt.mode, Env: testEnv, Command: []string{"/bin/true"}}, nil, nil, nil)
			if corral.ErrorCode(err) != tt.code {
				t.Fatalf("Run on %s = %v, want %s", tt.dir, err, tt.code)
			}
			msg := corral.ErrorMessage(err)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
		})
	}
	if got := owner(t, rootOwned); got != "0:0" {
		t.Errorf("the refused workspace is %s now, want 0:0 untouched", got)
	}
	// What needs no idmapping still works there, the sandbox user's own
	// directory: opened by the server while a parent (t.TempDir's, 0700)
	// is closed to the sandbox's user, then bound by its path.
	for _, reach := range []bool{false, true} {
		if reach {
			for p := filepath.Dir(ram); p != "/tmp" && p != "/"; p = filepath.Dir(p) {
				must(t, os.Chmod(p, 0o755))
			}
		}
		if ok, err := reachable(sandboxOwned, 65534, 65534); ok != reach || err != nil {
			t.Fatalf("reachable(%s) = %v, %v; want %v", sandboxOwned, ok, err, reach)
		}
		if code, out := runIn(t, sandboxOwned, ReadWrite, "echo x > f && cat f"); code != 0 || out != "x\n" {
			t.Fatalf("the sandbox user's workspace on ramfs (reachable %v): exit %d, %q", reach, code, out)
		}
	}
}

// TestIdmapUnavailableMessages covers the errors no filesystem here can
// produce (old kernels), through the function that words them.
func TestIdmapUnavailableMessages(t *testing.T) {
	st := &unix.Stat_t{Uid: 0, Gid: 0}
	tests := []struct {
		name, step string
		err        error
		want       []string
	}{
		{"no open_tree", "open_tree", unix.ENOSYS, []string{"has no open_tree (Linux 5.2 and later)"}},
		{"no mount_setattr", "mount_setattr", unix.ENOSYS, []string{"has no mount_setattr (Linux 5.12 and later)"}},
		{"no mount_setattr for the idmap", "idmap", unix.ENOSYS, []string{"has no mount_setattr"}},
		{"filesystem", "idmap", unix.EINVAL, []string{"owned by 0:0, not by the sandbox's user 65534:65534", "filesystem (somefs) cannot be idmapped", "does not change the owner"}},
		{"idmapped already", "idmap", unix.EPERM, []string{"refused to idmap it", "6.15"}},
		{"other", "mount_setattr", unix.EBUSY, []string{"refused mount_setattr on it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := idmapUnavailable("/ws", tt.step, tt.err, st, 65534, 65534, "somefs")
			if corral.ErrorCode(err) != corral.EUNAVAIL || !errors.Is(err, tt.err) {
				t.Fatalf("idmapUnavailable(%s, %v) = %v, want unavailable wrapping it", tt.step, tt.err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(corral.ErrorMessage(err), w) {
					t.Errorf("message %q does not say %q", corral.ErrorMessage(err), w)
				}
			}
		})
	}
}

// TestIdmapEscape runs the escape suite's file attacks (writes, the
// read-only workspace, links, reads, setuid, devices) with workspaces owned
// by root, so idmapped: the sandbox user is their owner there, and the host
// must still be unchanged after each.
func TestIdmapEscape(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: skipped under -short; make test runs it")
	}
	needSandbox(t)
	h := newEscapeHost(t)
	// The shared read-only workspace becomes root's.
	must(t, filepath.WalkDir(h.ro, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 0, 0)
	}))
	classes := []string{classWrite, classRO, classLinks, classRead, classSetuid, classDevices}
	ran := 0
	for i, c := range escapeCases() {
		if !slices.Contains(classes, c.class) {
			continue
		}
		ran++
		t.Run(c.name, func(t *testing.T) { runRootOwnedCase(t, h, i, c) })
	}
	if ran < 40 {
		t.Errorf("only %d cases ran, want the file attacks (at least 40)", ran)
	}
}

// runRootOwnedCase is runCase with a read-write workspace owned by root,
// as are the files the cases' setups plant.
func runRootOwnedCase(t *testing.T, h *escapeHost, i int, c escapeCase) {
	r := &caseRun{h: h, ws: h.ro, nonce: fmt.Sprintf("%sid%03dz", h.nonce, i)}
	mode := ReadOnly
	if c.rw {
		mode = ReadWrite
		// "rw-": left out of the snapshot of the workspaces' parent.
		r.ws = filepath.Join(h.root, fmt.Sprintf("rw-owned-%03d", i))
		mkdir(t, r.ws, 0o755, 0)
		must(t, os.Link(h.bin, filepath.Join(r.ws, "attack")))
	}
	if c.setup != nil {
		h.skipped[c.name] = true
		c.setup(t, r)
		h.skipped[c.name] = false
	}
	before := h.snapshot()
	l := c.limits
	if l.Wall == 0 {
		l.Wall = 10 * time.Second
	}
	e := h.env
	e.nonce = r.nonce
	env := append(slices.Clone(testEnv), childEnv+"=attack", "ATTACK="+c.name, "GORACE=atexit_sleep_ms=0")
	env = append(env, e.environ()...)
	out := &verdictWriter{reported: make(chan struct{})}
	var err error
	r.res, err = Run(Config{}, Spec{Workspace: r.ws, Mode: mode, Limits: l, Env: env, Command: []string{insideWorkspace + "/attack", "-test.run=^$"}}, nil, out, out)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.out = out.String()
	r.verdict = verdictLine(r.out)
	t.Logf("%s [exit %d %s]", r.verdict, r.res.ExitCode, r.res.Signal)
	switch {
	case strings.Contains(r.out, "ESCAPED "):
		t.Errorf("the attack succeeded: %s", r.verdict)
	case c.violation == "" && !strings.HasPrefix(r.verdict, "BLOCKED "):
		t.Errorf("no BLOCKED verdict; output:\n%.2000s", r.out)
	}
	if c.verify != nil {
		c.verify(t, r)
	}
	h.checkHost(t, r.nonce, before)
	if c.rw {
		// What the attack left in its workspace is root's, as the tree.
		filepath.WalkDir(r.ws, func(p string, _ fs.DirEntry, err error) error {
			if err == nil && owner(t, p) != "0:0" {
				t.Errorf("%s is owned by %s on the host, want 0:0", p, owner(t, p))
			}
			return nil
		})
	}
}
