package archive

import "hash/maphash"

// nameSet holds every path an archive named, by its folded form
// (sanitize.Fold), with its flags and, when it differs, its spelling, in
// as little memory as it can: a name costs a map slot of a 64-bit hash
// and an index, a byte of flags, two offsets, and its bytes in an arena
// of fixed chunks (never copied to grow). An archive at the directory cap
// holds 100,000 of them, and what they hold is what a hostile import
// costs beyond a benign one: a map of strings took twice as much, and the
// collector's headroom doubles whatever is live.
//
// A hash is only a hint: a name found by its hash is compared with the one
// asked for, and the few whose hashes collide live in a map of their
// own. The seed is random per set, so no archive can aim at it.
type nameSet struct {
	seed    maphash.Seed
	index   map[uint64]uint32 // hash of the folded name -> entry
	other   map[string]uint32 // folded name -> entry, for a hash already taken
	spelled map[string]string // folded name -> spelling, for the few that differ
	flags   []uint8
	starts  []uint32 // entry i's folded name is arena[starts[i]:ends[i]]
	ends    []uint32
	chunks  [][]byte // the arena; chunk k starts where chunk k-1's capacity ends
	base    uint32   // where the last chunk starts
}

// arenaChunk is the size of the arena's chunks; a longer name gets a
// chunk of its own.
const arenaChunk = 64 << 10

func newNameSet() *nameSet {
	return &nameSet{seed: maphash.MakeSeed(), index: map[uint64]uint32{}, spelled: map[string]string{}}
}

// get returns the flags and spelling of the name that folds to folded.
func (s *nameSet) get(folded string) (flags uint8, spelling string, ok bool) {
	i, ok := s.find(folded)
	if !ok {
		return 0, "", false
	}
	spelling, differs := s.spelled[folded]
	if !differs {
		spelling = folded
	}
	return s.flags[i], spelling, true
}

// find is the entry of folded.
func (s *nameSet) find(folded string) (uint32, bool) {
	if i, ok := s.index[maphash.String(s.seed, folded)]; ok && string(s.name(i)) == folded {
		return i, true
	}
	i, ok := s.other[folded]
	return i, ok
}

// add records a name not yet in the set.
func (s *nameSet) add(folded, spelling string, flags uint8) {
	i := uint32(len(s.flags))
	s.flags = append(s.flags, flags)
	start := s.keep(folded)
	s.starts, s.ends = append(s.starts, start), append(s.ends, start+uint32(len(folded)))
	if spelling != folded {
		s.spelled[folded] = spelling
	}
	h := maphash.String(s.seed, folded)
	if _, taken := s.index[h]; !taken {
		s.index[h] = i
		return
	}
	if s.other == nil {
		s.other = map[string]uint32{}
	}
	s.other[folded] = i
}

// setFlags replaces the flags of a name in the set.
func (s *nameSet) setFlags(folded string, flags uint8) {
	if i, ok := s.find(folded); ok {
		s.flags[i] = flags
	}
}

// keep copies b into the arena and returns where it starts.
func (s *nameSet) keep(b string) uint32 {
	last := len(s.chunks) - 1
	if last < 0 || cap(s.chunks[last])-len(s.chunks[last]) < len(b) {
		if last >= 0 {
			s.base += uint32(cap(s.chunks[last]))
		}
		s.chunks = append(s.chunks, make([]byte, 0, max(arenaChunk, len(b))))
		last++
	}
	start := s.base + uint32(len(s.chunks[last]))
	s.chunks[last] = append(s.chunks[last], b...)
	return start
}

// name is entry i's folded name, in the arena (not to be kept).
func (s *nameSet) name(i uint32) []byte {
	off, n := s.starts[i], s.ends[i]-s.starts[i]
	for _, c := range s.chunks {
		if off < uint32(cap(c)) {
			return c[off : off+n]
		}
		off -= uint32(cap(c))
	}
	return nil
}
