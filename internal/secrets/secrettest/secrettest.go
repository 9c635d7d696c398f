// Package secrettest finds copies of a secret in memory that a value can
// still reach: after a push, a test hands it the server's services and
// runner and the decrypted credential, and expects to hear of no copy.
//
// Find walks by reflection, so it sees unexported fields as well as
// exported ones, and it reads byte slices up to their capacity: a buffer
// that was Reset, or a slice re-cut shorter, still holds its old bytes.
// It cannot see what no pointer reaches (garbage not yet collected, stack
// frames of other goroutines, memory the runtime manages behind uintptr or
// unsafe.Pointer), nor inside channels and functions (closures), which it
// skips: it proves the absence of a kept copy, not a wiped heap.
package secrettest

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Find returns the paths, from root, of every string and byte slice or
// array reachable from root that contains needle. An empty needle finds
// nothing.
func Find(root any, needle []byte) []string {
	if len(needle) == 0 || root == nil {
		return nil
	}
	w := walker{needle: needle, seen: map[visit]bool{}}
	w.push(reflect.ValueOf(root), &step{seg: "root"})
	for len(w.todo) > 0 {
		it := w.todo[len(w.todo)-1]
		w.todo = w.todo[:len(w.todo)-1]
		w.step(it.v, it.path)
	}
	return w.found
}

type item struct {
	v    reflect.Value
	path *step
}

// step is one link of a path, kept as a chain back to the root and spelled
// out only for a match: a long linked list must not cost a string of its
// whole depth at every node.
type step struct {
	parent *step
	seg    string
	deref  bool // the path so far, dereferenced: (*path)
}

func (s *step) then(seg string) *step { return &step{parent: s, seg: seg} }

func (s *step) String() string {
	var segs []*step
	for p := s; p != nil; p = p.parent {
		segs = append(segs, p)
	}
	// Each dereference wraps all that comes before it, so its "(*" goes
	// to the very front and its ")" where it happens: one pass, no
	// rewriting of what is built.
	var b strings.Builder
	for _, p := range segs {
		if p.deref {
			b.WriteString("(*")
		}
	}
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i].deref {
			b.WriteString(")")
			continue
		}
		b.WriteString(segs[i].seg)
	}
	return b.String()
}

// visit is a place already walked: the same address seen as the same
// type (a struct and its first field share an address, not a type).
type visit struct {
	ptr uintptr
	typ reflect.Type
	n   int // the length, for slices: two slices of one array may differ
}

type walker struct {
	needle []byte
	seen   map[visit]bool
	todo   []item // a stack, not recursion: a long linked list must not overflow ours
	found  []string
}

func (w *walker) push(v reflect.Value, path *step) {
	if v.IsValid() {
		w.todo = append(w.todo, item{v, path})
	}
}

// first reports whether the address of v is seen for the first time.
func (w *walker) first(v reflect.Value, n int) bool {
	k := visit{ptr: v.Pointer(), typ: v.Type(), n: n}
	if k.ptr == 0 || w.seen[k] {
		return false
	}
	w.seen[k] = true
	return true
}

func (w *walker) step(v reflect.Value, path *step) {
	switch v.Kind() {
	case reflect.String:
		if strings.Contains(v.String(), string(w.needle)) {
			w.found = append(w.found, path.String())
		}
	case reflect.Pointer:
		if !v.IsNil() && w.first(v, 0) {
			w.push(v.Elem(), &step{parent: path, deref: true})
		}
	case reflect.Interface:
		if !v.IsNil() {
			e := v.Elem()
			w.push(e, path.then(".("+e.Type().String()+")"))
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			w.push(v.Field(i), path.then("."+t.Field(i).Name))
		}
	case reflect.Map:
		if v.IsNil() || !w.first(v, 0) {
			return
		}
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			kp := path.then("[" + describeKey(k) + "]")
			w.push(k, kp.then("(key)"))
			w.push(it.Value(), kp)
		}
	case reflect.Slice:
		if v.IsNil() || !w.first(v, v.Len()) {
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			w.bytes(v.Slice(0, v.Cap()).Bytes(), v.Len(), path)
			return
		}
		for i := range v.Len() {
			w.push(v.Index(i), path.then("["+strconv.Itoa(i)+"]"))
		}
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			// Unaddressable arrays have no Bytes: copy them out.
			b := make([]byte, v.Len())
			for i := range b {
				b[i] = byte(v.Index(i).Uint())
			}
			w.bytes(b, len(b), path)
			return
		}
		for i := range v.Len() {
			w.push(v.Index(i), path.then("["+strconv.Itoa(i)+"]"))
		}
	}
	// Chan, Func, UnsafePointer, Uintptr and scalars hold nothing to follow.
}

// bytes looks for the needle in b, whose first n bytes are in use: a match
// past n is in a slice's spare capacity, still in memory all the same.
func (w *walker) bytes(b []byte, n int, path *step) {
	i := bytes.Index(b, w.needle)
	switch {
	case i < 0:
	case i+len(w.needle) <= n:
		w.found = append(w.found, path.String())
	default:
		w.found = append(w.found, path.String()+" (past its length, in its capacity)")
	}
}

func describeKey(k reflect.Value) string {
	switch k.Kind() {
	case reflect.String:
		s := k.String()
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return strconv.Quote(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(k.Uint(), 10)
	}
	return fmt.Sprintf("key of type %s", k.Type())
}
