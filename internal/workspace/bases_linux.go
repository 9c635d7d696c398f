package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Bases: what a run saw.
//
// An entry's old hash is what Apply checks the persistent workspace
// against, so it must be the content the run saw, not whatever the
// workspace holds when the run ends. A copy stage records that when it
// copies (copyBaseline). An overlay stage reads its lower layer, the
// persistent workspace itself, when the manifest is taken: a file an
// editor changed while the run worked would then look like the run's base,
// and approving would overwrite the editor's work.
//
// So whoever changes the persistent workspace while a stage is open over
// it calls KeepBases first, for the paths it is about to change: the stage
// records, durably, what those paths held, and the manifest takes the old
// side of those paths from that record. The editor's change then makes
// approval conflict instead of being overwritten. A path recorded once
// keeps its first record: that is what the run could have seen.
//
// This errs on the safe side: a run that read the editor's new content
// (after the change) and built on it still conflicts, and is decided again
// by a person.

// stageBasesFile holds the records, by path.
const stageBasesFile = "bases.json"

// baseRecord is what a path of the persistent workspace held before it
// changed under an open stage.
type baseRecord struct {
	Exists bool        `json:"exists"`
	SHA256 string      `json:"sha256,omitempty"`
	Mode   fs.FileMode `json:"mode,omitempty"`
}

// KeepBases records what paths hold in the persistent workspace now, before
// the caller changes them, for the manifest of this stage (see Bases). It
// does nothing for a copy stage (its baseline already says what the run
// was given) or a stage whose manifest is taken (its old hashes are fixed).
// The caller serialises it with every other writer of the workspace.
func (s *Stage) KeepBases(paths []string) error {
	if !s.state.Overlay || s.taken() || len(paths) == 0 {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(s.dir, stageStateFile)); errors.Is(err, fs.ErrNotExist) {
		return nil // removed: no run will be measured against it
	}
	bases, err := s.bases()
	if err != nil {
		return err
	}
	changed := false
	for _, p := range paths {
		if _, ok := bases[p]; ok || !cleanRelPath(p) {
			continue
		}
		n, kind, err := readNode(s.persistent, p, true)
		if err != nil {
			return err
		}
		rec := baseRecord{}
		if kind == nodeOther {
			rec = baseRecord{Exists: true, SHA256: n.sha, Mode: n.mode}
		}
		bases[p] = rec
		changed = true
	}
	if !changed {
		return nil
	}
	return writeJSONFile(filepath.Join(s.dir, stageBasesFile), bases, true)
}

func (s *Stage) bases() (map[string]baseRecord, error) {
	bases := map[string]baseRecord{}
	err := readJSONFile(filepath.Join(s.dir, stageBasesFile), &bases)
	if errors.Is(err, os.ErrNotExist) {
		return bases, nil
	}
	return bases, err
}

// withBases gives each entry of m whose path changed in the persistent
// workspace while the run worked the old side the run saw.
func (s *Stage) withBases(m Manifest) (Manifest, error) {
	if !s.state.Overlay {
		return m, nil
	}
	bases, err := s.bases()
	if err != nil || len(bases) == 0 {
		return m, err
	}
	for i := range m {
		b, ok := bases[m[i].Path]
		if !ok {
			continue
		}
		e := &m[i]
		switch {
		case b.Exists && e.Op == OpDelete:
			e.OldSHA256, e.OldMode = b.SHA256, b.Mode
		case b.Exists:
			e.Op, e.OldSHA256, e.OldMode = OpModify, b.SHA256, b.Mode
		case e.Op == OpDelete:
			// The file appeared while the run worked, and the run deleted
			// it: never applied.
			addFlag(e, FlagStale, "the file appeared in the workspace while the run worked; the run's delete of it is not applied")
		default:
			e.Op, e.OldSHA256, e.OldMode = OpCreate, "", 0
		}
	}
	return m, nil
}

// persistentNames lists the names in a directory of the persistent
// workspace, reached without symlinks; nil when it is not a directory there.
func (s *Stage) persistentNames(dir string) ([]string, error) {
	ents, err := readDirBeneath(s.persistent, dir)
	if err != nil {
		if absentErr(errors.Unwrap(err)) || absentErr(err) {
			return nil, nil
		}
		return nil, err
	}
	names := make([]string, len(ents))
	for i, de := range ents {
		names[i] = de.Name()
	}
	return names, nil
}
