package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"corral"
)

// Disk limits.
//
// Every stage gets its own ext4 filesystem, in a sparse image file in the
// stage's directory (disk.img) attached to a loop device, mounted at
// layers/ for an overlay (the upper and work directories live on it, so
// everything the run writes, copy-ups included, lands there) or at tree/
// for a copy (the copy is made onto it). The kernel then enforces both
// limits, whoever writes and however: a write past the filesystem's free
// blocks, or a file past its free inodes, fails with ENOSPC. No Corral
// code has to watch the run, and the host's disk never sees more than the
// image can hold.
//
// Choices, measured on this project's machines:
//
//   - No journal. A journal is written in full for each stage (4 MiB for
//     a small filesystem, 32 MiB for the default 1 GiB one), against the
//     host's disk and the agent's pending cap, and it only matters after
//     a crash of the machine. A stage is used after one only if its
//     manifest was taken, which fsyncs every new file (see Stage); before
//     such a stage is mounted again, e2fsck -p repairs whatever metadata
//     the crash left behind.
//   - Inode tables are not written (lazy_itable_init, mounted with
//     noinit_itable): the image is a new sparse file, which reads as zeros
//     anyway. A new 1 GiB filesystem with 100,000 inodes takes about
//     150 KiB of the host's disk.
//   - No reserved blocks (-m 0: the sandbox's user is not root anyway),
//     no room for online growth (^resize_inode).
//   - Mounted nodev,nosuid (never noexec: a run builds and runs its own
//     binaries in the tree), and with discard: deleting a file punches its
//     blocks out of the image, so the host gets them back at once and
//     DiskUsage measures what the stage really holds.
//   - The loop device is set up with ioctls and auto-clear: it detaches
//     itself when the filesystem is unmounted, or when the process that
//     attached it dies before mounting, so none is ever left behind.
//     mke2fs and e2fsck are run as programs: no well-kept Go library
//     writes ext4.

// ext4Magic is EXT4_SUPER_MAGIC.
const ext4Magic = 0xef53

const (
	diskBlock     = 4096 // the filesystem's block size
	diskInodeSize = 256
	// diskReservedInodes are ext4's own: 1 to 10, and 11 for lost+found,
	// which a stage removes (e2fsck makes it again if it needs one).
	diskReservedInodes = 11
	// diskSpare is free space a stage's filesystem has on top of its
	// limit. ext4 refuses a write whose page-cache folio does not fit,
	// whole, even with blocks still free (measured here: a 1 MiB write
	// failed, not even in part, with 764 KiB free), and a folio is at most
	// 2 MiB: without the spare a run could get less than its limit. It is
	// also where DiskFull draws the line: a filesystem with less than the
	// spare free has had more than its limit written into it, and one
	// that refused a write has less.
	diskSpare = 2 << 20
	// diskTries bounds the attempts to size a filesystem (see makeDisk).
	diskTries = 3
)

// diskToolEnv is the whole environment of mke2fs and e2fsck: nothing of
// the server's (a model key, for one) reaches them.
var diskToolEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}

// diskToolDirs are where diskTools looks for e2fsprogs when PATH lacks
// them, as it does for a server started by a user who is not root.
var diskToolDirs = []string{"/usr/sbin", "/sbin"}

// diskTools finds mke2fs and e2fsck.
func diskTools() (mke2fs, e2fsck string, err error) {
	find := func(name string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, dir := range diskToolDirs {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p
			}
		}
		return ""
	}
	mke2fs, e2fsck = find("mke2fs"), find("e2fsck")
	if mke2fs == "" || e2fsck == "" {
		return "", "", corral.Errorf(corral.EUNAVAIL,
			"disk limits need mke2fs and e2fsck, which are missing (apt-get install e2fsprogs)")
	}
	return mke2fs, e2fsck, nil
}

// diskProbe remembers that the machine could make, mount and remove a
// stage's filesystem. Only success is remembered: a machine that lacked a
// tool or a free loop device may have them a moment later.
var diskProbe struct {
	sync.Mutex
	ok bool
}

// DiskAvailable reports whether stages can get their own filesystem here:
// loop devices, ext4 and e2fsprogs. NewStage refuses without them
// (EUNAVAIL, naming what is missing): there is no unlimited mode. Each
// call checks for the tools and /dev/loop-control, then makes, mounts and
// removes a small filesystem, until that succeeds once: success is cached.
func DiskAvailable() error {
	diskProbe.Lock()
	defer diskProbe.Unlock()
	if diskProbe.ok {
		return nil
	}
	if _, _, err := diskTools(); err != nil {
		return err
	}
	if err := unix.Access("/dev/loop-control", unix.R_OK|unix.W_OK); err != nil {
		return &corral.Error{Code: corral.EUNAVAIL, Op: "disk",
			Message: fmt.Sprintf("disk limits need loop devices: /dev/loop-control: %v (as root, modprobe loop)", err), Err: err}
	}
	if err := probeDisk(); err != nil {
		return &corral.Error{Code: corral.EUNAVAIL, Op: "disk",
			Message: "disk limits need the kernel to mount an ext4 filesystem from a loop device, which failed here", Err: err}
	}
	diskProbe.ok = true
	return nil
}

// probeDisk makes, mounts and removes the smallest filesystem a stage
// could have.
func probeDisk() error {
	dir, err := os.MkdirTemp("", "corral-disk-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return err
	}
	if err := makeDisk(filepath.Join(dir, stageDiskFile), mnt, 1<<20, 64); err != nil {
		return err
	}
	if err := unmountDisk(mnt); err != nil {
		return err
	}
	if mounted, err := diskMounted(mnt); err != nil || mounted {
		return fmt.Errorf("%s still mounted (%v)", mnt, err)
	}
	return nil
}

// diskMount is where the stage's filesystem is mounted.
func (s *Stage) diskMount() string {
	if s.state.Overlay {
		return filepath.Join(s.dir, stageLayersDir)
	}
	return s.Tree()
}

func (s *Stage) diskImage() string { return filepath.Join(s.dir, stageDiskFile) }

// makeDisk makes an ext4 filesystem in a new image file into which bytes
// can be written and inodes files made, and mounts it at target, with
// lost+found removed.
//
// ext4's overhead (inode tables, bitmaps, group descriptors, and the
// clusters it holds back for its own metadata: 2% of the blocks, at most
// 4096) is estimated, and diskSpare added; the free space is then read
// back, and where the estimate fell short the filesystem is made again,
// larger by what was missing. So a run can write at least its limit, and
// at most diskSpare and a few blocks more. Inodes come in whole blocks of
// the inode table in each block group (16 inodes per 128 MiB of the
// filesystem): a run may make up to 16 files more per 128 MiB.
func makeDisk(image, target string, bytes, inodes int64) error {
	mke2fs, _, err := diskTools()
	if err != nil {
		return err
	}
	blocks := diskBlocks(bytes+diskSpare, inodes)
	for try := 1; ; try++ {
		if err := mkfs(mke2fs, image, blocks, inodes+diskReservedInodes); err != nil {
			return err
		}
		if err := mountDisk(image, target, false); err != nil {
			return err
		}
		var st unix.Statfs_t
		if err := unix.Statfs(target, &st); err != nil {
			unmountDisk(target)
			return fmt.Errorf("statfs %s: %w", target, err)
		}
		free := int64(st.Bavail)*int64(st.Bsize) - diskSpare
		if free >= bytes && int64(st.Ffree) >= inodes {
			break
		}
		if err := unmountDisk(target); err != nil {
			return err
		}
		if try == diskTries {
			return fmt.Errorf("a filesystem of %d blocks has %d bytes and %d inodes free, want %d and %d",
				blocks, free, st.Ffree, bytes, inodes)
		}
		blocks += max(0, (bytes-free+diskBlock-1)/diskBlock) + 16 // short of blocks: inodes follow them
	}
	// The tree of a copy is the filesystem's root: nothing of ext4's may
	// show in it, or be taken for the run's.
	if err := os.Remove(filepath.Join(target, "lost+found")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		unmountDisk(target)
		return err
	}
	return nil
}

// diskBlocks estimates the size, in blocks, of a filesystem with bytes
// free and inodes to spare (see makeDisk).
func diskBlocks(bytes, inodes int64) int64 {
	const perGroup = 8 * diskBlock // blocks in a block group: one block of bitmap
	base := (bytes+diskBlock-1)/diskBlock + ((inodes+diskReservedInodes)*diskInodeSize+diskBlock-1)/diskBlock
	reserved := min(base/49+1, 4096)
	groups := (base+reserved)/perGroup + 1
	// Per group: two bitmaps and, in some groups, a copy of the superblock
	// and the descriptors; the inode table of each group is rounded up to
	// whole blocks. Then the root directory and a margin.
	return base + reserved + groups*4 + 64
}

// mkfs writes an empty ext4 filesystem of blocks blocks with inodes
// inodes into image, which it creates or replaces.
func mkfs(mke2fs, image string, blocks, inodes int64) error {
	f, err := os.OpenFile(image, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(blocks * diskBlock)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	cmd := exec.Command(mke2fs, "-q", "-F", "-t", "ext4", "-b", strconv.Itoa(diskBlock), "-I", strconv.Itoa(diskInodeSize),
		"-N", strconv.FormatInt(inodes, 10), "-m", "0", "-O", "^has_journal,^resize_inode",
		"-E", "lazy_itable_init=1,nodiscard,root_owner=0:0", image)
	cmd.Env = diskToolEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mke2fs: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// checkDisk repairs, where it can, what a crash of the machine left of the
// filesystem in image, before it is mounted again. It is quick for a clean
// filesystem, and for a small one in any case.
func checkDisk(image string) error {
	_, e2fsck, err := diskTools()
	if err != nil {
		return err
	}
	cmd := exec.Command(e2fsck, "-p", image)
	cmd.Env = diskToolEnv
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	// Exit status 1 and 2: errors were corrected.
	if errors.As(err, &exit) && exit.ExitCode() > 0 && exit.ExitCode()&^3 == 0 {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("e2fsck %s: %w: %s", image, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// mountDisk mounts the filesystem in image at target on a free loop
// device; with reuse, on the one that already backs image if there is one
// (the same image on two devices would be two filesystems writing one
// file). A new image never reuses: a device attached to the image it
// replaces would have the old one's size.
func mountDisk(image, target string, reuse bool) error {
	var dev string
	var fd int
	var err error
	if reuse {
		dev, fd, err = loopFor(image)
	} else {
		dev, fd, err = attachLoop(image)
	}
	if err != nil {
		return err
	}
	// fd holds the device until the mount does: an auto-clear device
	// detaches when its last holder lets go.
	defer unix.Close(fd)
	if err := unix.Mount(dev, target, "ext4", unix.MS_NODEV|unix.MS_NOSUID, "discard,noinit_itable,errors=remount-ro"); err != nil {
		return fmt.Errorf("mount %s (%s) at %s: %w", dev, image, target, err)
	}
	return nil
}

// loopFor returns a loop device backed by image, open: the one that
// already backs it, or else a free one.
func loopFor(image string) (string, int, error) {
	if dev := backingLoop(image); dev != "" {
		if fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
			if backingLoop(image) == dev { // it did not detach before the open
				return dev, fd, nil
			}
			unix.Close(fd)
		}
	}
	return attachLoop(image)
}

// backingLoop names the loop device whose backing file is image, "" when
// there is none.
func backingLoop(image string) string {
	for _, dev := range loopDevices() {
		if dev.backing == image {
			return dev.path
		}
	}
	return ""
}

type loopDevice struct {
	path    string // /dev/loopN
	backing string // its backing file, as the kernel names it
}

// loopDevices lists the attached loop devices, from sysfs.
func loopDevices() []loopDevice {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []loopDevice
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		name := filepath.Base(filepath.Dir(filepath.Dir(f)))
		out = append(out, loopDevice{path: "/dev/" + name, backing: strings.TrimSuffix(string(b), "\n")})
	}
	return out
}

// attachLoop attaches image to a free loop device, with auto-clear, and
// returns the device open.
func attachLoop(image string) (string, int, error) {
	file, err := unix.Open(image, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, fmt.Errorf("open %s: %w", image, err)
	}
	defer unix.Close(file)
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", -1, fmt.Errorf("open /dev/loop-control: %w", err)
	}
	defer unix.Close(ctl)
	for range 64 {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", -1, fmt.Errorf("find a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", -1, fmt.Errorf("open %s: %w", dev, err)
		}
		err = configureLoop(fd, file, image)
		if errors.Is(err, unix.EBUSY) {
			// Another process took the device between the two calls.
			unix.Close(fd)
			continue
		}
		if err != nil {
			unix.Close(fd)
			return "", -1, fmt.Errorf("attach %s to %s: %w", image, dev, err)
		}
		return dev, fd, nil
	}
	return "", -1, fmt.Errorf("attach %s: every free loop device was taken by another process first", image)
}

// configureLoop binds the loop device fd to file, auto-clearing.
func configureLoop(fd, file int, name string) error {
	cfg := unix.LoopConfig{Fd: uint32(file)}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], name)
	err := unix.IoctlLoopConfigure(fd, &cfg)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTTY) {
		return err
	}
	// Before Linux 5.8 there is no LOOP_CONFIGURE: bind, then set the
	// flags. A crash between the two leaves the device attached.
	if err := unix.IoctlSetInt(fd, unix.LOOP_SET_FD, file); err != nil {
		return err
	}
	if err := unix.IoctlLoopSetStatus64(fd, &cfg.Info); err != nil {
		unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0)
		return err
	}
	return nil
}

// unmountDisk unmounts the stage filesystem at target if there is one: at
// once when nothing uses it, else lazily (then its loop device detaches
// when the last user lets go).
func unmountDisk(target string) error {
	for range 8 { // mounts stacked on one another, by accident
		mounted, err := diskMounted(target)
		if err != nil || !mounted {
			return err
		}
		err = unix.Unmount(target, 0)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(target, unix.MNT_DETACH)
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", target)
}

// diskMounted reports whether an ext4 filesystem is mounted at target.
func diskMounted(target string) (bool, error) { return mountedAt(target, ext4Magic) }

// remountDisk mounts a re-opened stage's filesystem again, after checking
// it: the machine may have stopped without unmounting it.
func (s *Stage) remountDisk() error {
	if err := DiskAvailable(); err != nil {
		return err
	}
	image := s.diskImage()
	if backingLoop(image) == "" {
		// Only an image no device backs may be checked: one that is
		// attached may still be mounted somewhere.
		if err := checkDisk(image); err != nil {
			return corral.Internal("open stage", err)
		}
	}
	if err := mountDisk(image, s.diskMount(), true); err != nil {
		return corral.Internal("open stage", err)
	}
	return nil
}

// DiskFull reports whether the run has used up its disk: less free space
// than the spare the filesystem has on top of the limit (see diskSpare),
// or no inode left. A stage made before disk limits is never full.
func (s *Stage) DiskFull() (bool, error) {
	if !s.state.Disk {
		return false, nil
	}
	target := s.diskMount()
	// Not mounted, statfs would answer for the host's filesystem.
	if mounted, err := diskMounted(target); err != nil || !mounted {
		return false, corral.Internal("disk full", fmt.Errorf("%s is not mounted (%v)", target, err))
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return false, corral.Internal("disk full", err)
	}
	return int64(st.Bavail)*int64(st.Bsize) < diskSpare || st.Ffree == 0, nil
}

// DiskUsage returns the bytes the stage's filesystem takes on the host's
// disk: the image's allocated blocks, which grow as the run writes and
// shrink as it deletes. The filesystem is synced first: what the run
// wrote (the overlay, volatile, never syncs) must be on the image to be
// counted. 0 for a stage made before disk limits.
func (s *Stage) DiskUsage() (int64, error) {
	if !s.state.Disk {
		return 0, nil
	}
	if mounted, err := diskMounted(s.diskMount()); err == nil && mounted {
		fd, err := unix.Open(s.diskMount(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, corral.Internal("disk usage", err)
		}
		err = unix.Syncfs(fd)
		unix.Close(fd)
		if err != nil {
			return 0, corral.Internal("disk usage", err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(s.diskImage(), &st); err != nil {
		return 0, corral.Internal("disk usage", err)
	}
	return st.Blocks * 512, nil
}

// walkStaged walks what a stage of the workspace at root holds: everything
// but the root itself and the secrets (a secret directory is not entered).
// fn gets each entry's host name and its slash-separated relative path.
func walkStaged(root string, secrets secretMatcher, fn func(name, rel string, de fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(name string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := relSlash(root, name)
		if err != nil || rel == "." {
			return err
		}
		if secrets.secretEntry(rel, de.Name()) {
			if de.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		return fn(name, rel, de)
	})
}

// copySize measures what a copy of the workspace takes on a stage's
// filesystem, generously: whole blocks for each file, directory and
// symlink, directory entries, and an extent block per 512 MiB of a file;
// and the inodes it takes.
func copySize(persistent string, secrets secretMatcher) (bytes, inodes int64, err error) {
	err = walkStaged(persistent, secrets, func(name, rel string, de fs.DirEntry) error {
		inodes++
		bytes += int64(len(de.Name())) + 16 // its entry in its directory
		switch t := de.Type(); {
		case t.IsRegular():
			fi, err := de.Info()
			if err != nil {
				return err
			}
			size := fi.Size()
			bytes += (size+diskBlock-1)/diskBlock*diskBlock + size/(512<<20)*diskBlock
		case t.IsDir(), t&fs.ModeSymlink != 0:
			bytes += diskBlock
		}
		return nil
	})
	return bytes, inodes, err
}
