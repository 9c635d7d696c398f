package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"corral"
	"corral/internal/metrics"
	"corral/internal/netguard"
	"corral/internal/store"
)

// Several controls may share one PostgreSQL store: one serves, holding
// the control lease in the store and renewing it; the others wait as
// standbys, and the first to find it expired (its holder died) takes it
// and starts as a restarted server does: it reconciles or re-attaches the
// runs the last one left, and its nodes find it (--control URL1,URL2).
// One holder at a time is what keeps every guarantee written for one
// server (the runs it drives, the sweeps, the throttles) true.

const (
	controlLease = "control"
	// defaultFailoverAfter is the lease's term when Config.FailoverAfter
	// is 0: how long a lease outlives its holder's last renewal, and so
	// how long a standby waits after its holder dies.
	defaultFailoverAfter = 15 * time.Second
	// minFailoverAfter bounds it below: the holder renews three times a
	// term, and stops if none gets through in two thirds of one.
	minFailoverAfter = 3 * time.Second
)

// leaseTimes are the control lease's term, how often its holder renews
// it (it has two more tries before the lease can lapse) and how often a
// standby looks for a lapsed one.
func (a *App) leaseTimes() (term, renew, poll time.Duration) {
	term = a.cfg.FailoverAfter
	if term == 0 {
		term = defaultFailoverAfter
	}
	return term, term / 3, min(time.Second, term/10)
}

// holdControl waits until this server holds the control lease, then
// keeps renewing it until Close, which gives it up. Losing it (a renewal
// refused, or none getting through for a whole term) ends Run.
func (a *App) holdControl(ctx context.Context, db *store.DB, reads func(rest http.Handler) http.Handler) error {
	log := a.opt.log
	holder := holderOf(corral.NewID("ctl"), a.advertise())
	said := false
	stopStandby := func() {}
	defer func() { stopStandby() }()
	term, _, poll := a.leaseTimes()
	var asked time.Time // when the lease was asked for, on this process's clock
	for {
		asked = time.Now()
		ok, err := renewLease(ctx, db, holder, term)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if !said {
			other, until, _ := db.Lease(ctx, controlLease)
			addr := ""
			if a.guard != nil {
				addr = "http://" + a.guard.Addr().String()
			}
			log.Info("standby: another control serves from this store; this one forwards requests to it, and takes over when its lease lapses",
				"holder", other, "until", until.Format(time.RFC3339), "addr", addr)
			said = true
			// It serves once it holds the lease and its handler is open.
			serving := func() bool { return a.holdsLease.Load() && a.opened.Load() }
			fwd := newForwarder(db, holder, serving, term, poll)
			stopStandby = a.standby(fwd, reads(fwd))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
	log.Info("holding the control lease", "holder", holder)
	// From here every write checks the lease is still this control's: one
	// paused past its term writes nothing once another has taken over.
	db.Fence(controlLease, holder)
	a.leaseLost = make(chan error, 1)
	a.holdsLease.Store(true)
	done := make(chan struct{})
	go a.renewControl(db, holder, asked.Add(term), done)
	a.defer_(func() {
		close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		db.ReleaseLease(ctx, controlLease, holder)
	})
	return nil
}

// renewLease takes or renews the control lease for a term from the
// store's clock.
func renewLease(ctx context.Context, db *store.DB, holder string, term time.Duration) (bool, error) {
	now, err := db.Clock(ctx)
	if err != nil {
		return false, err
	}
	return db.TakeLease(ctx, controlLease, holder, now, now.Add(term))
}

// renewControl renews the lease, held until held by this process's
// clock, until done is closed.
func (a *App) renewControl(db *store.DB, holder string, held time.Time, done <-chan struct{}) {
	term, renew, _ := a.leaseTimes()
	t := time.NewTicker(renew)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		// held is reckoned on this process's monotonic clock, from before
		// the renewal was asked for: never later than the store's term.
		asked := time.Now()
		ctx, cancel := context.WithTimeout(a.ctx, renew)
		ok, err := renewLease(ctx, db, holder, term)
		cancel()
		switch {
		case err == nil && ok:
			held = asked.Add(term)
			continue
		case err == nil:
			a.holdsLease.Store(false)
			a.leaseLost <- fmt.Errorf("another control holds the control lease now: this one stops")
		case time.Now().After(held.Add(-renew)):
			// The store cannot be reached: stop before the lease can have
			// lapsed and a standby started driving the same runs.
			a.holdsLease.Store(false)
			a.leaseLost <- fmt.Errorf("could not renew the control lease for %v: this one stops: %w", term-renew, err)
		default:
			a.opt.log.Warn("could not renew the control lease; trying again", "err", err)
			continue
		}
		return
	}
}

// standby answers on the server's address while it waits for the
// lease, until stop: /healthz 200 (the process is alive), /readyz 200
// while a control serves to forward to, and everything else with h: the
// store reads answered here, the rest forwarded by fwd to the serving
// control (forward.go). Its metrics address (Config.MetricsAddr), when
// it has one, serves the same health checks and metrics of its own: the
// store's gauges and what it answered. stop hands both addresses to the
// real servers at once: requests in flight go on being forwarded, now to
// this control itself.
func (a *App) standby(fwd *forwarder, h http.Handler) (stop func()) {
	health := http.NewServeMux()
	health.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	health.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), checkTimeout)
		defer cancel()
		if u, _ := fwd.look(ctx); u == nil {
			writeHealth(w, http.StatusServiceUnavailable, readiness{Status: "unavailable",
				Checks: map[string]string{"lease": "standby: no control serves from this store now to forward to"}})
			return
		}
		writeHealth(w, http.StatusOK, readiness{Status: "ok", Checks: map[string]string{"lease": "standby: answers store reads and forwards the rest to the serving control"}})
	})
	m := metrics.New(metrics.Config{Gauges: metrics.Gauges{Store: a.storeCounts}})
	h = m.HTTP(h)
	var stops []func()
	if a.guard != nil {
		stops = append(stops, lend(a.guard, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
				health.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(w, r)
		}), a.opt.log))
	}
	if a.metricsLn != nil {
		health.Handle("GET /metrics", m.Handler())
		stops = append(stops, lend(a.metricsLn, health, a.opt.log))
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// lend serves h on ln until stop, which hands ln back for another server
// to serve on: each connection open then closes after the request it
// serves.
func lend(ln net.Listener, h http.Handler, log *slog.Logger) (stop func()) {
	inner := ln
	if g, ok := ln.(*netguard.Listener); ok {
		inner = g.Listener
	}
	tcp, ok := inner.(*net.TCPListener)
	if !ok {
		return func() {}
	}
	p := &pausable{Listener: ln, tcp: tcp}
	// The server's own limits: slow clients are cut off, and each answer
	// has a write deadline (a forwarded stream moves it as it writes).
	srv := newHTTPServer(h, log, defaultTimeouts)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(p)
	}()
	return func() {
		srv.SetKeepAlivesEnabled(false) // each connection closes after the request it serves
		p.Close()
		<-done
		tcp.SetDeadline(time.Time{}) // the real server accepts from here on
	}
}

// pausable lends the server's listener to the standby: closing it ends
// the standby's Accept without closing the socket the server goes on to
// serve on.
type pausable struct {
	net.Listener
	tcp    *net.TCPListener
	closed atomic.Bool
}

func (p *pausable) Accept() (net.Conn, error) {
	c, err := p.Listener.Accept()
	if p.closed.Load() {
		if c != nil {
			c.Close()
		}
		return nil, net.ErrClosed
	}
	return c, err
}

func (p *pausable) Close() error {
	p.closed.Store(true)
	return p.tcp.SetDeadline(time.Now())
}
