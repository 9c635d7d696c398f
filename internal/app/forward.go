package app

// A standby forwards: every request that reaches a control which does
// not hold the control lease is passed to the one that does (its
// address is in the lease), so a load balancer may send anything to any
// control, as Vault's standbys forward to its active node. A request
// that arrives while no control serves (the holder died and its lease
// has not lapsed yet) waits for the next one, up to a term and a bit,
// instead of failing; one that could not reach the holder is tried again
// on the next, since it was never sent. Event streams are not forwarded:
// a standby answers them itself, from the store and what the serving
// control publishes (internal/runfeed), so a stream held on a standby
// goes on across a failover untouched.
//
// Nodes are not forwarded: their relay belongs on the serving control,
// and a 503 sends them along their --control list to find it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"corral"
	"corral/internal/api"
	"corral/internal/fleet"
	"corral/internal/store"
)

// forwardedHeader marks a request a standby forwarded: a control that
// gets one while it stands by itself answers 503 rather than forward it
// again, so two controls that each believe the other serves cannot pass
// a request back and forth.
const forwardedHeader = "Corral-Forwarded"

// holderOf is what a control writes into the control lease: an id of
// its own and the URL the others forward to. urlOf reads the URL back.
func holderOf(id, advertise string) string { return id + " " + advertise }

func urlOf(holder string) (*url.URL, bool) {
	_, s, ok := strings.Cut(holder, " ")
	if !ok {
		return nil, false
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	return u, true
}

// advertise is the URL other controls forward requests to:
// Config.Advertise, else the listen address, whose unspecified host
// (0.0.0.0, ::) is replaced by this machine's name.
func (a *App) advertise() string {
	if a.cfg.Advertise != "" {
		return strings.TrimSuffix(a.cfg.Advertise, "/")
	}
	if a.guard == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(a.guard.Addr().String())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			host = name
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// forwarder passes a standby's requests to the serving control.
type forwarder struct {
	db      *store.DB
	self    string      // this control's holder string
	serving func() bool // whether this control holds the lease now
	// wait bounds how long a request waits for a control to serve: a
	// lease's term and a bit, the longest a failover takes.
	wait, poll time.Duration
	// transferIdle bounds each read and write of a request's body and
	// its answer's: a transfer may last, a stalled client may not.
	transferIdle time.Duration
	transport    *http.Transport

	mu     sync.Mutex
	target *url.URL // the serving control's, as last read
	read   time.Time
}

func newForwarder(db *store.DB, self string, serving func() bool, term, poll time.Duration) *forwarder {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	t.ResponseHeaderTimeout = 0 // a long call or a stream answers when it answers
	t.Proxy = nil               // controls reach each other directly, never through HTTP_PROXY
	return &forwarder{db: db, self: self, serving: serving, wait: term + 2*poll + 2*time.Second, poll: poll,
		transferIdle: api.TransferIdle, transport: t}
}

var errNoControl = corral.Errorf(corral.EUNAVAIL, "no control serves from this store now: the one that did stopped, and none has taken over yet; try again")

// current is the serving control's URL: the lease's holder while its
// lease lasts (this control's own once it serves), read again at most
// every poll; it waits for one until deadline.
func (f *forwarder) current(ctx context.Context, deadline time.Time) (*url.URL, error) {
	for {
		f.mu.Lock()
		u, fresh := f.target, time.Since(f.read) < f.poll
		f.mu.Unlock()
		if u != nil && fresh {
			return u, nil
		}
		u, err := f.look(ctx)
		if err != nil {
			return nil, err
		}
		if u != nil {
			f.mu.Lock()
			f.target, f.read = u, time.Now()
			f.mu.Unlock()
			return u, nil
		}
		if time.Now().After(deadline) {
			return nil, errNoControl
		}
		if !f.pause(ctx) {
			return nil, ctx.Err()
		}
	}
}

// look reads the lease: the URL of a holder whose lease lasts; nil while
// none does, or while this control holds it but is still starting; and
// an error for a live holder that wrote no URL (a control of an older
// version, which no request need wait for).
func (f *forwarder) look(ctx context.Context) (*url.URL, error) {
	holder, until, err := f.db.Lease(ctx, controlLease)
	if err != nil {
		return nil, nil
	}
	now, err := f.db.Clock(ctx)
	if err != nil || !until.After(now) {
		return nil, nil
	}
	if holder == f.self && !f.serving() {
		return nil, nil // taking over: not serving yet
	}
	u, ok := urlOf(holder)
	if !ok {
		return nil, errNoAddress
	}
	return u, nil
}

var errNoAddress = corral.Errorf(corral.EUNAVAIL, "the serving control does not say where it answers (a version before forwarding): "+
	"send requests to it directly, or upgrade it")

// pause waits a poll before the next look; false when ctx ended first.
func (f *forwarder) pause(ctx context.Context) bool {
	t := time.NewTimer(f.poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// forget drops the target u, which could not be reached: the next
// request reads the lease again.
func (f *forwarder) forget(u *url.URL) {
	f.mu.Lock()
	if f.target == u {
		f.target = nil
	}
	f.mu.Unlock()
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(forwardedHeader) != "" || strings.HasPrefix(r.URL.Path, fleet.RelayPath) {
		unavailable(w, corral.Errorf(corral.EUNAVAIL, "this control is a standby: another one serves from the same store, and this one takes over if it stops"))
		return
	}
	deadline := time.Now().Add(f.wait)
	// The body's first MaxBody bytes are read first (all of it, for any
	// request but an upload), so that a request the serving control never
	// got can be sent to the next. A longer body streams on after them,
	// and can be sent again only while none of the rest has been read.
	var prefix []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, api.MaxBody+1))
		if err != nil {
			writeError(w, http.StatusBadRequest, corral.Errorf(corral.EINVALID, "the request body could not be read"))
			return
		}
		prefix = b
	}
	streamed := len(prefix) > api.MaxBody
	rc := http.NewResponseController(w)
	rest := &countingReader{r: r.Body, rc: rc, idle: f.transferIdle}
	// A transfer (a large upload or download) moves its deadlines as
	// bytes flow, as the API's own transfers do: a slow client is still
	// dropped, a working one is not.
	w = &slidingResponse{ResponseWriter: w, rc: rc, idle: f.transferIdle}
	for {
		target, err := f.current(r.Context(), deadline)
		if err != nil {
			unavailable(w, err)
			return
		}
		unreached := false
		p := &httputil.ReverseProxy{
			Rewrite:   func(pr *httputil.ProxyRequest) { f.rewrite(pr.In, pr.Out, target) },
			Transport: f.transport,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				if unsent(err) {
					unreached = true
					return
				}
				if r.Context().Err() == nil {
					writeError(w, http.StatusBadGateway, corral.Errorf(corral.EUNAVAIL, "the serving control went away before it answered: the request may or may not have taken effect"))
				}
			},
		}
		in := r.Clone(r.Context())
		in.Body, in.ContentLength = io.NopCloser(bytes.NewReader(prefix)), int64(len(prefix))
		if streamed {
			in.Body, in.ContentLength = io.NopCloser(io.MultiReader(bytes.NewReader(prefix), rest)), r.ContentLength
		}
		p.ServeHTTP(w, in)
		if !unreached {
			return
		}
		if rest.n > 0 {
			writeError(w, http.StatusBadGateway, corral.Errorf(corral.EUNAVAIL, "the serving control went away while the request's body was sent: send it again"))
			return
		}
		f.forget(target)
		if time.Now().After(deadline) {
			unavailable(w, errNoControl)
			return
		}
		if !f.pause(r.Context()) {
			return
		}
	}
}

// countingReader counts what was read of r, moving the request's read
// deadline forward as it reads.
type countingReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
	n    int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	_ = c.rc.SetReadDeadline(time.Now().Add(c.idle))
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// slidingResponse moves the answer's write deadline forward as it is
// written. Unwrap lets the reverse proxy flush and hijack (a WebSocket)
// the connection underneath.
type slidingResponse struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (s *slidingResponse) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.idle))
	return s.ResponseWriter.Write(p)
}

func (s *slidingResponse) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// rewrite aims out at target: the client's Host is kept (the serving
// control checks Origin against it), the client's address appended to
// X-Forwarded-For (list the controls in --trusted-proxy so that the
// serving one believes it), and the request marked as forwarded.
func (f *forwarder) rewrite(in, out *http.Request, target *url.URL) {
	out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
	out.Host = in.Host
	hops := slices.Clone(in.Header.Values("X-Forwarded-For"))
	if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		hops = append(hops, ip)
	}
	out.Header.Del("X-Forwarded-For")
	if len(hops) > 0 {
		out.Header.Set("X-Forwarded-For", strings.Join(hops, ", "))
	}
	// What a load balancer in front said of the client's scheme and host
	// goes on as it came (the reverse proxy drops them otherwise).
	for _, h := range []string{"X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded"} {
		if v := in.Header.Values(h); len(v) > 0 {
			out.Header[h] = slices.Clone(v)
		}
	}
	out.Header.Set(forwardedHeader, "1")
}

// unsent says whether a round trip failed before the request could have
// reached the serving control: it could not be dialled.
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// unavailable answers 503 with why, asking to try again shortly.
func unavailable(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, err)
}

// writeError answers with an error body as the API writes one.
func writeError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{
		"code": corral.ErrorCode(err), "message": corral.ErrorMessage(err)}})
}
