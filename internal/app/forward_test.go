package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/store"
)

// forwardStore is a store with the control lease held by holder from a
// clock offset hours on (each move of the lease a later one, as a
// takeover after the term would be).
func forwardStore(t *testing.T) (*store.DB, func(holder string)) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var mu sync.Mutex
	hours := 0
	return db, func(holder string) {
		mu.Lock()
		defer mu.Unlock()
		hours++
		now := time.Now().Add(time.Duration(hours) * time.Hour)
		if ok, err := db.TakeLease(ctx, controlLease, holder, now, now.Add(time.Hour)); !ok || err != nil {
			t.Errorf("TakeLease(%s) = %v, %v", holder, ok, err)
		}
	}
}

// TestForwarderFollowsTheServingControl: a standby passes requests to the
// lease's holder, the client's Host kept and its address appended to
// X-Forwarded-For; a request it could not deliver goes to the next holder;
// a forwarded request is not forwarded again, nor a node's relay; with no
// control serving it answers 503 once its wait is over.
func TestForwarderFollowsTheServingControl(t *testing.T) {
	db, hold := forwardStore(t)
	type seen struct{ host, xff, mark, body string }
	got := make(chan seen, 10)
	upstream := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			got <- seen{r.Host, r.Header.Get("X-Forwarded-For"), r.Header.Get(forwardedHeader), string(b)}
			io.WriteString(w, name)
		}))
	}
	one, two := upstream("one"), upstream("two")
	defer two.Close()
	hold(holderOf("ctl_one", one.URL))
	f := newForwarder(db, holderOf("ctl_me", "http://127.0.0.1:1"), func() bool { return false }, 3*time.Second, 20*time.Millisecond)
	front := httptest.NewServer(f)
	defer front.Close()

	do := func(method, path string, header http.Header, body string) (int, string) {
		req, _ := http.NewRequest(method, front.URL+path, strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		req.Host = "corral.example.org"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("POST", "/api/agents", http.Header{"X-Forwarded-For": {"192.0.2.7"}}, `{"name":"a"}`); code != 200 || body != "one" {
		t.Fatalf("forwarded POST = %d %q, want 200 from the holder", code, body)
	}
	if s := <-got; s.host != "corral.example.org" || s.xff != "192.0.2.7, 127.0.0.1" || s.mark != "1" || s.body != `{"name":"a"}` {
		t.Fatalf("the holder saw %+v", s)
	}

	// The holder dies; its lease moves to the next one meanwhile.
	one.Close()
	go func() {
		time.Sleep(100 * time.Millisecond)
		hold(holderOf("ctl_two", two.URL))
	}()
	if code, body := do("POST", "/api/agents", nil, `{"name":"b"}`); code != 200 || body != "two" {
		t.Fatalf("POST across the failover = %d %q, want 200 from the next holder", code, body)
	}
	if s := <-got; s.body != `{"name":"b"}` {
		t.Fatalf("the next holder saw %+v", s)
	}

	for _, tc := range []struct {
		name, path string
		header     http.Header
	}{
		{"forwarded again", "/api/me", http.Header{forwardedHeader: {"1"}}},
		{"a node's relay", "/relay", nil},
	} {
		if code, body := do("GET", tc.path, tc.header, ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "standby") {
			t.Errorf("%s: %d %q, want 503 saying this is a standby", tc.name, code, body)
		}
	}
	select {
	case s := <-got:
		t.Fatalf("a request that must not be forwarded was: %+v", s)
	default:
	}

	// A holder of a version before forwarding wrote no URL: said at once.
	// (A new forwarder each, with a short wait, set before it serves.)
	fresh := func() func(string) (int, string) {
		f := newForwarder(db, holderOf("ctl_me", "http://127.0.0.1:1"), func() bool { return false }, 3*time.Second, 20*time.Millisecond)
		f.wait = 100 * time.Millisecond
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		return func(path string) (int, string) {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
	}
	hold("host/ctl_old")
	if code, body := fresh()("/api/me"); code != http.StatusServiceUnavailable || !strings.Contains(body, "does not say where it answers") {
		t.Fatalf("with an older holder: %d %q, want 503 saying so", code, body)
	}
	if err := db.ReleaseLease(context.Background(), controlLease, "host/ctl_old"); err != nil {
		t.Fatal(err)
	}
	if code, body := fresh()("/api/me"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no control serves") {
		t.Fatalf("with no control serving: %d %q, want 503", code, body)
	}
}

// TestRewriteForwardedFor: the client's address is appended to what
// X-Forwarded-For it came with (the serving control believes only what
// its trusted proxies vouch for, reading from the right).
func TestRewriteForwardedFor(t *testing.T) {
	f := &forwarder{}
	for _, tc := range []struct {
		prior []string
		want  string
	}{
		{nil, "198.51.100.9"},
		{[]string{"192.0.2.1"}, "192.0.2.1, 198.51.100.9"},
		{[]string{"192.0.2.1", "203.0.113.4"}, "192.0.2.1, 203.0.113.4, 198.51.100.9"},
	} {
		in := httptest.NewRequest("GET", "http://front/api/me", nil)
		in.RemoteAddr = "198.51.100.9:4711"
		in.Header["X-Forwarded-For"] = tc.prior
		in.Header.Set("X-Forwarded-Proto", "https")
		out := in.Clone(context.Background())
		out.Header = http.Header{}
		f.rewrite(in, out, mustURL(t, "http://10.0.0.5:8080"))
		if got := out.Header.Get("X-Forwarded-Proto"); got != "https" {
			t.Errorf("X-Forwarded-Proto = %q, want the load balancer's https passed on", got)
		}
		if got := out.Header.Get("X-Forwarded-For"); got != tc.want || out.URL.Host != "10.0.0.5:8080" || out.Host != "front" {
			t.Errorf("prior %v: X-Forwarded-For %q to %s (Host %s), want %q to 10.0.0.5:8080 (Host front)", tc.prior, got, out.URL.Host, out.Host, tc.want)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestForwarderDropsAStalledClient: a client that stops reading a
// forwarded answer that goes on and on is dropped once a write has
// waited the transfer's idle bound, and so is the answer it held on the
// serving control.
func TestForwarderDropsAStalledClient(t *testing.T) {
	db, hold := forwardStore(t)
	ended := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		w.Header().Set("Content-Type", "text/event-stream")
		big := strings.Repeat("x", 64<<10)
		for id := 1; r.Context().Err() == nil; id++ {
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", id, big); err != nil {
				return
			}
		}
	}))
	defer upstream.Close()
	hold(holderOf("ctl_one", upstream.URL))
	f := newForwarder(db, holderOf("ctl_me", "http://127.0.0.1:1"), func() bool { return false }, 3*time.Second, 20*time.Millisecond)
	f.transferIdle = 100 * time.Millisecond
	front := httptest.NewServer(f)
	defer front.Close()

	req, _ := http.NewRequest("GET", front.URL+"/api/runs/run_1/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() // never read: the client has stalled
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatal("the serving control's stream still runs a minute after its client stalled")
	}
}

// TestForwarderPassesLargeBodies: a body longer than the API's bound for
// JSON (an upload, an edited file up to corral.MaxFile) is forwarded
// whole, streamed after its first part; one the first holder could not be
// dialled for goes whole to the next.
func TestForwarderPassesLargeBodies(t *testing.T) {
	db, hold := forwardStore(t)
	got := make(chan string, 1)
	next := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		got <- fmt.Sprintf("%d %x", n, h.Sum(nil))
	}))
	defer next.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // dialling it fails
	hold(holderOf("ctl_dead", dead.URL))
	f := newForwarder(db, holderOf("ctl_me", "http://127.0.0.1:1"), func() bool { return false }, 3*time.Second, 20*time.Millisecond)
	front := httptest.NewServer(f)
	defer front.Close()
	go func() {
		time.Sleep(100 * time.Millisecond)
		hold(holderOf("ctl_next", next.URL))
	}()

	body := bytes.Repeat([]byte("0123456789abcdef"), (9<<20)/16) // 9 MiB
	sum := sha256.Sum256(body)
	resp, err := http.Post(front.URL+"/api/agents/agt_1/documents?name=big.md", "text/markdown", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := fmt.Sprintf("%d %x", len(body), sum); resp.StatusCode != 200 || <-got != want {
		t.Fatalf("forwarded a 9 MiB body: %d; want all of it at the next holder", resp.StatusCode)
	}
}

// TestForwarderSlidesTransfers: a download through a standby that lasts
// longer than the server's write timeout goes on while bytes flow, as the
// API's own transfers do.
func TestForwarderSlidesTransfers(t *testing.T) {
	db, hold := forwardStore(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 10 {
			w.Write(bytes.Repeat([]byte("x"), 1000))
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	defer upstream.Close()
	hold(holderOf("ctl_one", upstream.URL))
	f := newForwarder(db, holderOf("ctl_me", "http://127.0.0.1:1"), func() bool { return false }, 3*time.Second, 20*time.Millisecond)
	f.transferIdle = time.Second
	// The standby's server, with a write timeout a fifth of the transfer's.
	srv := newHTTPServer(f, slog.New(slog.DiscardHandler), httpTimeouts{Header: time.Second, Request: time.Second, Idle: time.Second, Write: 100 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/api/agents/agt_1/workspace/archive")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != 10000 {
		t.Fatalf("the download through the standby: %d bytes, %v; want all 10000", n, err)
	}
}
