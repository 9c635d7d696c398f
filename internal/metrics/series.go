package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// series keeps the series the hot paths land in, found once: a vector
// finds a series by hashing its label values and comparing them, and a
// request or a model call would do it two or three times each. A series
// is made on its first use, as the vector would make it.
type series struct {
	mu       sync.RWMutex
	seconds  map[string]prometheus.Observer // by route
	requests map[routeCode]prometheus.Counter
	calls    map[callKey]prometheus.Observer // durations
	tokens   map[tokenKey]prometheus.Observer
}

type routeCode struct {
	route string
	code  int
}

type callKey struct{ op, model, failure string }

type tokenKey struct{ op, model, typ string }

func newSeries() *series {
	return &series{seconds: map[string]prometheus.Observer{}, requests: map[routeCode]prometheus.Counter{},
		calls: map[callKey]prometheus.Observer{}, tokens: map[tokenKey]prometheus.Observer{}}
}

// find is cache[k], made by make the first time under s's lock.
func find[K comparable, V any](s *series, cache map[K]V, k K, make func() V) V {
	s.mu.RLock()
	v, ok := cache[k]
	s.mu.RUnlock()
	if ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok = cache[k]; !ok {
		v = make()
		cache[k] = v
	}
	return v
}

func (m *Metrics) requestSeries(route string, code int) (prometheus.Counter, prometheus.Observer) {
	c := find(m.series, m.series.requests, routeCode{route, code}, func() prometheus.Counter {
		return m.requests.WithLabelValues(route, codeText(code))
	})
	o := find(m.series, m.series.seconds, route, func() prometheus.Observer {
		return m.requestSeconds.WithLabelValues(route)
	})
	return c, o
}

func (m *Metrics) callSeries(k callKey) prometheus.Observer {
	return find(m.series, m.series.calls, k, func() prometheus.Observer {
		return m.modelSeconds.WithLabelValues(k.op, m.provider, k.model, k.failure)
	})
}

func (m *Metrics) tokenSeries(k tokenKey) prometheus.Observer {
	return find(m.series, m.series.tokens, k, func() prometheus.Observer {
		return m.tokens.WithLabelValues(k.op, m.provider, k.model, k.typ)
	})
}
