package archive

import (
	"fmt"
	"hash/maphash"
	"strings"
	"testing"
)

func TestNameSet(t *testing.T) {
	s := newNameSet()
	long := strings.Repeat("x", arenaChunk+10) // a chunk of its own
	want := map[string]struct {
		spelling string
		flags    uint8
	}{}
	add := func(folded, spelling string, flags uint8) {
		s.add(folded, spelling, flags)
		want[folded] = struct {
			spelling string
			flags    uint8
		}{spelling, flags}
	}
	// Enough names to fill several chunks, one longer than a chunk among
	// them, and a few spelled otherwise than folded.
	for i := range 20_000 {
		add(fmt.Sprintf("dir%06d/file", i), fmt.Sprintf("dir%06d/file", i), nameDir)
		if i == 5000 {
			add(long, long, 0)
		}
		if i%1000 == 0 {
			add(fmt.Sprintf("readme%d.md", i), fmt.Sprintf("README%d.md", i), nameExplicit)
		}
	}
	// A name whose hash is taken by another lives apart, and both are found.
	s.index[maphash.String(s.seed, "collides")] = 0
	add("collides", "Collides", nameExplicit)
	if len(s.other) != 1 {
		t.Fatalf("the colliding name is not kept apart: %d", len(s.other))
	}
	s.setFlags("dir000007/file", nameDir|nameExplicit)
	want["dir000007/file"] = struct {
		spelling string
		flags    uint8
	}{"dir000007/file", nameDir | nameExplicit}
	for folded, w := range want {
		flags, spelling, ok := s.get(folded)
		if !ok || flags != w.flags || spelling != w.spelling {
			t.Fatalf("get(%.40q) = %d, %.40q, %v; want %d, %.40q", folded, flags, spelling, ok, w.flags, w.spelling)
		}
	}
	for _, missing := range []string{"dir000007", "dir020000/file", "collide", long + "x", ""} {
		if _, _, ok := s.get(missing); ok {
			t.Fatalf("get(%.40q) found a name never added", missing)
		}
	}
	if len(s.chunks) < 3 {
		t.Fatalf("%d chunks: the test did not cross a chunk", len(s.chunks))
	}
}
