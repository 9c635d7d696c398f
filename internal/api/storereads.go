package api

import (
	"net/http"
	"slices"
)

// storeReads are the routes answered from the store alone: no run's live
// state, no node, no model provider, no document index and no setting of
// one control's own. A control standing by for another (several sharing a
// PostgreSQL store) answers these itself and forwards the rest, so the
// reads a web app makes most grow with the controls, and each answers
// exactly what the serving control would: the same rows, read afresh,
// under the same access checks.
var storeReads = []string{
	"GET /api/setup",
	"GET /api/me",
	"GET /api/tokens",
	"GET /api/credentials",
	"GET /api/users",
	"GET /api/limits",
	"GET /api/egress/presets",
	"GET /api/agents",
	"GET /api/agents/{id}",
	"GET /api/agents/{id}/grants",
	"GET /api/agents/{id}/links",
	"GET /api/agents/{id}/messages",
	"GET /api/agents/{id}/runs",
	"GET /api/agents/{id}/secrets",
	"GET /api/runs/{id}",
	"GET /api/runs/{id}/trace",
	"GET /api/runs/{id}/tree",
	"GET /api/runs/{id}/events", // from the store, and what the serving control publishes (runfeed)
	"GET /api/runs",
	"GET /api/agents/{id}/changes",
	"GET /api/changes",
	"GET /api/usage",
	"GET /api/audit",
	"GET /api/admin/budgets",
	"GET /api/openapi.json",
}

// StoreReadRoutes returns the patterns StoreReads answers ("GET /api/agents").
func StoreReadRoutes() []string { return slices.Clone(storeReads) }

// StoreReads returns a handler that answers the store reads and hands
// every other request to rest. It is meant for a Server built on the
// store's services alone: Accounts, Agents, Runs without an engine,
// Decisions without trees, Credentials, Egress and Operations; no other
// route is ever reached on it.
func (s *Server) StoreReads(rest http.Handler) http.Handler {
	routes := map[string]route{}
	for _, rt := range s.routes() {
		routes[rt.method+" "+rt.path] = rt
	}
	mux := http.NewServeMux()
	for _, p := range storeReads {
		rt, ok := routes[p]
		if !ok {
			panic("api: store read " + p + " is not a route")
		}
		mux.Handle(p, s.wrap(rt))
	}
	local := s.outer(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A path the list does not hold, or holds for another method,
		// has no pattern here.
		if _, pattern := mux.Handler(r); pattern == "" {
			rest.ServeHTTP(w, r)
			return
		}
		local.ServeHTTP(w, r)
	})
}
