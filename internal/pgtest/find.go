package pgtest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// debianRoot is where Debian's packages put each major version's
// programs (/usr/lib/postgresql/15/bin/initdb), off PATH.
const debianRoot = "/usr/lib/postgresql"

// errMissing is the reason to skip where PostgreSQL is not installed.
var errMissing = errors.New("PostgreSQL is not installed: no initdb on PATH or under " + debianRoot + "/*/bin (make postgres installs Debian's)")

// findPrograms returns the initdb and postgres to run: those on PATH,
// else the newest version under root (debianRoot but in tests).
func findPrograms(root string) (initdb, postgres string, err error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		// The postgres beside initdb's real file, not any postgres on
		// PATH: the two must be the same version.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if q := filepath.Join(filepath.Dir(real), "postgres"); isExecutable(q) {
				return real, q, nil
			}
		}
		if q, err := exec.LookPath("postgres"); err == nil {
			return p, q, nil
		}
	}
	if dir := newestBin(root); dir != "" {
		return filepath.Join(dir, "initdb"), filepath.Join(dir, "postgres"), nil
	}
	return "", "", errMissing
}

// newestBin returns root/VERSION/bin of the highest VERSION under root
// that has both initdb and postgres, or "" when none has.
func newestBin(root string) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	var best []int
	dir := ""
	for _, e := range entries {
		v, ok := parseVersion(e.Name())
		if !ok || (dir != "" && slices.Compare(v, best) <= 0) {
			continue
		}
		bin := filepath.Join(root, e.Name(), "bin")
		if isExecutable(filepath.Join(bin, "initdb")) && isExecutable(filepath.Join(bin, "postgres")) {
			best, dir = v, bin
		}
	}
	return dir
}

// parseVersion reads a version directory's name ("15", "9.6") as
// numbers, so that 10 sorts above 9.6.
func parseVersion(name string) ([]int, bool) {
	var v []int
	for part := range strings.SplitSeq(name, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

// isExecutable reports whether p is a file someone may execute.
func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
