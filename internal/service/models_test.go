package service

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"corral"
)

// fakeModels is the gateway as Models sees it: a provider whose list and
// failure the test sets, counting how often it is asked.
type fakeModels struct {
	configured bool
	def        string
	list       []string
	err        error
	asked      int
}

func (f *fakeModels) Configured() error {
	if f.configured {
		return nil
	}
	return corral.Errorf(corral.EUNAVAIL, "no provider")
}

func (f *fakeModels) ModelName(m string) string {
	if m == "" {
		return f.def
	}
	return m
}

func (f *fakeModels) ListModels(context.Context) ([]string, error) {
	f.asked++
	return f.list, f.err
}

// TestModelsList: the default first, then the provider's others; the list
// kept for modelsFresh, asked again after; a failure gives the default
// alone and is not kept.
func TestModelsList(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	src := &fakeModels{configured: true, def: "b", list: []string{"a", "b", "c"}}
	m := NewModels(src, nil)
	m.now = func() time.Time { return now }

	want := ModelList{Models: []string{"b", "a", "c"}, Default: "b", Configured: true, Listed: true}
	if got := m.List(ctx); !reflect.DeepEqual(got, want) {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	src.list = []string{"d"}
	now = now.Add(modelsFresh - time.Second)
	if got := m.List(ctx); !reflect.DeepEqual(got, want) || src.asked != 1 {
		t.Fatalf("List within modelsFresh = %+v after %d asks, want %+v after 1", got, src.asked, want)
	}
	now = now.Add(time.Second)
	want = ModelList{Models: []string{"b", "d"}, Default: "b", Configured: true, Listed: true}
	if got := m.List(ctx); !reflect.DeepEqual(got, want) || src.asked != 2 {
		t.Fatalf("List after modelsFresh = %+v after %d asks, want %+v after 2", got, src.asked, want)
	}

	now = now.Add(modelsFresh)
	src.err = errors.New("404")
	want = ModelList{Models: []string{"b"}, Default: "b", Configured: true}
	for i := range 2 {
		if got := m.List(ctx); !reflect.DeepEqual(got, want) || src.asked != 3+i {
			t.Fatalf("List of a provider that does not answer = %+v after %d asks, want %+v after %d", got, src.asked, want, 3+i)
		}
	}

	src.configured = false
	if got := m.List(ctx); !reflect.DeepEqual(got, ModelList{Models: []string{}}) || src.asked != 4 {
		t.Fatalf("List without a provider = %+v after %d asks, want an empty list, not asked", got, src.asked)
	}
}
