//go:build !linux

package workspace

// Elsewhere than Linux there is no way here to resolve a path without
// following links (openat with O_NOFOLLOW on each component, renameat2), so
// applying to a workspace is refused, closed.

import (
	"os"

	"corral"
)

var errTreeUnsupported = &corral.Error{Code: corral.EUNAVAIL, Op: "workspace.Apply",
	Message: "applying changes to a workspace needs Linux"}

func syncFile(f *os.File) error { return f.Sync() }

type dirTree struct{}

func openTree(string) (*dirTree, error) { return nil, errTreeUnsupported }

func (t *dirTree) close() {}

func (t *dirTree) missingDirs(string) ([]string, error) { return nil, errTreeUnsupported }
func (t *dirTree) lstat(string) error                   { return errTreeUnsupported }
func (t *dirTree) state(string) (*fileState, error)     { return nil, errTreeUnsupported }
func (t *dirTree) openFile(string) (*os.File, error)    { return nil, errTreeUnsupported }
func (t *dirTree) mkdir(string) error                   { return errTreeUnsupported }
func (t *dirTree) rmdir(string) error                   { return errTreeUnsupported }
func (t *dirTree) rename(string, string, bool) error    { return errTreeUnsupported }
func (t *dirTree) remove(string) error                  { return errTreeUnsupported }
func (t *dirTree) removeTemp(string, string) error      { return errTreeUnsupported }
func (t *dirTree) syncDir(string) error                 { return errTreeUnsupported }
func (t *dirTree) emptyDir(string) (bool, error)        { return false, errTreeUnsupported }
func (t *dirTree) syncTemp(string, string) error        { return errTreeUnsupported }
func (t *dirTree) syncAll() error                       { return errTreeUnsupported }

func (t *dirTree) moveTemp(*dirTree, string, string, uint32, *fileState) error {
	return errTreeUnsupported
}

func (t *dirTree) createTemp(string, string, uint32, *fileState) (*os.File, error) {
	return nil, errTreeUnsupported
}
