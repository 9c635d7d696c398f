package secrettest

import (
	"sort"
	"strings"
	"testing"
)

const needle = "s3cr3t-N33DLE"

type inner struct {
	note  string
	token []byte
}

type node struct {
	Name  string
	next  *node
	inner inner
	any   any
	m     map[string]any
	arr   [16]byte
	list  []*node
	ch    chan string
	fn    func() string
}

func TestFind(t *testing.T) {
	cases := []struct {
		name  string
		build func() any
		want  []string // substrings of the paths Find must answer, one each
	}{
		{"nothing when absent", func() any {
			a := &node{Name: "a", inner: inner{note: "no secret here", token: []byte("tok")}, m: map[string]any{"k": "v"}}
			a.next = a
			return a
		}, nil},
		{"an unexported nested field", func() any {
			return &node{inner: inner{note: "x " + needle + " y"}}
		}, []string{".inner.note"}},
		{"an unexported byte slice", func() any {
			return node{inner: inner{token: []byte("prefix" + needle)}}
		}, []string{".inner.token"}},
		{"a byte slice's spare capacity", func() any {
			b := []byte(needle + "-tail")
			return &node{inner: inner{token: b[:2]}} // re-cut: the rest is still there
		}, []string{".inner.token (past its length"}},
		{"a byte array", func() any {
			n := &node{}
			copy(n.arr[:], needle)
			return n
		}, []string{".arr"}},
		{"a map value", func() any {
			return &node{m: map[string]any{"deep": map[int][]string{7: {"a", needle}}}}
		}, []string{`.m["deep"]`}},
		{"a map key", func() any {
			return map[string]int{needle: 1}
		}, []string{"(key)"}},
		{"behind an interface", func() any {
			var x any = &inner{note: needle}
			return &node{any: x}
		}, []string{".any.(*secrettest.inner)"}},
		{"in a cycle, found once", func() any {
			a, b := &node{Name: "a"}, &node{Name: "b"}
			a.next, b.next = b, a
			b.list = []*node{a, b}
			b.inner.note = needle
			return a
		}, []string{".inner.note"}},
		{"a slice that holds itself", func() any {
			s := []any{nil, needle}
			s[0] = s
			return s
		}, []string{"[1]"}},
		{"in two places", func() any {
			return []string{needle, "x", needle}
		}, []string{"[0]", "[2]"}},
		{"channels and functions are skipped", func() any {
			ch := make(chan string, 1)
			ch <- needle
			return &node{ch: ch, fn: func() string { return needle }}
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Find(c.build(), []byte(needle))
			if len(got) != len(c.want) {
				t.Fatalf("Find = %q, want %d paths like %q", got, len(c.want), c.want)
			}
			sort.Strings(got)
			want := append([]string(nil), c.want...)
			sort.Strings(want)
			for i := range want {
				if !strings.Contains(got[i], want[i]) {
					t.Errorf("Find path %q, want one containing %q (all: %q)", got[i], want[i], got)
				}
			}
		})
	}
}

func TestFindZeroedSecret(t *testing.T) {
	secret := []byte(needle)
	holder := &node{inner: inner{token: secret}}
	if got := Find(holder, []byte(needle)); len(got) != 1 {
		t.Fatalf("Find before zeroing = %q, want one path", got)
	}
	clear(secret)
	if got := Find(holder, []byte(needle)); len(got) != 0 {
		t.Fatalf("Find after zeroing = %q, want none", got)
	}
}

func TestFindLongChain(t *testing.T) {
	// A deep graph must not overflow the stack: Find keeps its own.
	var head *node
	for range 100000 {
		head = &node{next: head}
	}
	last := head
	for last.next != nil {
		last = last.next
	}
	last.inner.note = needle
	if got := Find(head, []byte(needle)); len(got) != 1 || !strings.HasSuffix(got[0], ".inner.note") {
		t.Fatalf("Find over a long chain = %d paths, want one", len(got))
	}
	if got := Find(nil, []byte(needle)); got != nil {
		t.Fatalf("Find(nil) = %q", got)
	}
	if got := Find(head, nil); got != nil {
		t.Fatalf("Find with an empty needle = %q", got)
	}
}
