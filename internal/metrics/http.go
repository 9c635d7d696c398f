package metrics

import (
	"net/http"
	"strconv"
	"time"
)

// HTTP counts and times each request next answers, under the route
// pattern next's ServeMux matched it with (http.Request.Pattern, such as
// "POST /v1/chat/completions"), never its path; a request next's mux
// matched with no pattern of its own (a path it does not know) counts as
// Other. Mount it right around a handler that is a ServeMux, or whose
// mux sees the same *http.Request.
func (m *Metrics) HTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		outer := r.Pattern // the pattern that led here, if any: not next's
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := r.Pattern
		if route == "" || route == outer {
			route = Other
		}
		count, seconds := m.requestSeries(route, sw.status)
		count.Inc()
		seconds.Observe(time.Since(start).Seconds())
	})
}

// statusWriter keeps the status an answer was sent with. Unwrap lets
// http.ResponseController reach the writer below (flushes, deadlines, a
// terminal's hijack).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// codes are the code label's values, made once: a request does not
// format its status.
var codes = func() []string {
	out := make([]string, 600)
	for i := 100; i < len(out); i++ {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

// codeText is the code label of status: 200 for an answer that wrote
// nothing (net/http sends 200 then), Other outside 100-599.
func codeText(status int) string {
	switch {
	case status == 0:
		return codes[http.StatusOK]
	case status < 100 || status >= len(codes):
		return Other
	}
	return codes[status]
}
