//go:build !linux

package workspace

import "corral"

// Stage is one run's staged tree of a persistent workspace. Staging needs
// Linux: elsewhere every stage is refused.
type Stage struct{}

func errStageUnsupported() error {
	return corral.Errorf(corral.EUNAVAIL, "staged workspaces need Linux")
}

// NewStage refuses: staging needs Linux.
func NewStage(persistent, dir string, opt StageOptions) (*Stage, error) {
	return nil, errStageUnsupported()
}

// OpenStage refuses: staging needs Linux.
func OpenStage(persistent, dir string, opt StageOptions) (*Stage, error) {
	return nil, errStageUnsupported()
}

func (s *Stage) Tree() string                { return "" }
func (s *Stage) Overlay() bool               { return false }
func (s *Stage) Dir() string                 { return "" }
func (s *Stage) Manifest() (Manifest, error) { return nil, errStageUnsupported() }
func (s *Stage) Source() Source              { return DirSource("") }
func (s *Stage) Close() error                { return nil }

// RemoveStage refuses: staging needs Linux.
func RemoveStage(dir string) error { return errStageUnsupported() }

// DiskAvailable refuses: disk limits need Linux (loop devices, ext4).
func DiskAvailable() error {
	return corral.Errorf(corral.EUNAVAIL, "disk limits need Linux: loop devices and ext4")
}

func (s *Stage) DiskFull() (bool, error)   { return false, errStageUnsupported() }
func (s *Stage) DiskUsage() (int64, error) { return 0, errStageUnsupported() }
