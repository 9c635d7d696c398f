package api

import (
	"net/http"

	"corral"
)

// AdminOnly serves h, a handler that is not the API's own (the server's
// metrics on its main port), to an admin's session or token alone: the
// API's 401 without credentials, its 403 for anyone else.
func (s *Server) AdminOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := s.authenticate(r)
		if err == nil && !u.Admin {
			err = corral.Errorf(corral.EFORBIDDEN, "only an admin may read this")
		}
		if err != nil {
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
