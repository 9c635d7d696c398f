package runfeed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"corral"
	"corral/internal/pgtest"
	"corral/internal/poll"
	"corral/internal/store"
	"corral/internal/trace"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// next is the watcher's next event; false when its channel closed. A
// watcher waiting past a generous deadline fails the test.
func next(t *testing.T, ch <-chan corral.RunEvent) (corral.RunEvent, bool) {
	t.Helper()
	select {
	case e, ok := <-ch:
		return e, ok
	case <-time.After(30 * time.Second):
		t.Fatal("no event in 30 s")
		return corral.RunEvent{}, false
	}
}

// listening waits until n connections listen on the database.
func listening(t *testing.T, admin *pgx.Conn, n int) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%d listener(s)", n), func() bool {
		var got int
		err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN %' AND state = 'idle'`).Scan(&got)
		return err == nil && got == n
	})
}

// TestFeedCarriesARunsEvents: what one control's runner publishes
// reaches a watcher on another control through the store: the trace
// events (read from the store, whole), the running command's output in
// order and without a byte missing (a long piece in chunks), the model's
// text, and the run's end, which lets the watcher go. A watcher who
// joins mid-command gets what was heard of its output. When the feed's
// connection is cut, its watchers are let go to read the store again,
// and it listens again.
func TestFeedCarriesARunsEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := pgtest.NewDatabase(t)
	open := func() *store.DB {
		db, err := store.OpenPostgres(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	driving, standing := open(), open()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	feed := NewFeed(standing, quiet)
	feedDone := make(chan struct{})
	go func() { defer close(feedDone); feed.Run(ctx) }()
	defer func() { cancel(); <-feedDone }()
	pub := NewPublisher(driving, quiet)
	go pub.Run(ctx)
	listening(t, admin, 1)

	runID := corral.NewID("run")
	ch, stop := feed.Subscribe(runID)
	defer stop()
	rec := trace.NewRecorder(driving, nil)
	record := func(typ string) trace.Event {
		e, err := rec.Append(ctx, runID, typ, map[string]string{"x": typ})
		if err != nil {
			t.Fatal(err)
		}
		pub.Event(runID, corral.RunEvent{Trace: &e})
		return e
	}
	wantTrace := func(want trace.Event) {
		t.Helper()
		e, ok := next(t, ch)
		if !ok || e.Trace == nil || e.Trace.Seq != want.Seq || e.Trace.Hash != want.Hash || string(e.Trace.Data) != string(want.Data) {
			t.Fatalf("got %+v (open %v), want trace event %d as stored", e, ok, want.Seq)
		}
	}
	// One notice may stand for several events (the publisher merges
	// neighbours), the first one since the run was watched too: each of
	// them is handed on.
	unnoticed, err := rec.Append(ctx, runID, trace.Admitted, nil)
	if err != nil {
		t.Fatal(err)
	}
	started := record(trace.Started)
	wantTrace(unnoticed)
	wantTrace(started)
	wantTrace(record(trace.ToolCall))

	// The command's output: pieces, one longer than a notification holds
	// (with a rune across the chunk's edge).
	long := strings.Repeat("ab", chunk/2-1) + "é" + strings.Repeat("z", 9*chunk) // past what is kept for joiners
	pieces := []string{"hello ", "world\n", long}
	var whole string
	for _, p := range pieces {
		pub.Event(runID, corral.RunEvent{Output: &corral.RunOutput{ToolCallID: "call_1", Offset: len(whole), Text: p}})
		whole += p
	}
	var got bytes.Buffer
	for got.Len() < len(whole) {
		e, ok := next(t, ch)
		if !ok || e.Output == nil || e.Output.ToolCallID != "call_1" || e.Output.Offset != got.Len() {
			t.Fatalf("got %+v (open %v) after %d bytes of output, want the next piece of call_1's", e, ok, got.Len())
		}
		got.WriteString(e.Output.Text)
	}
	if got.String() != whole {
		t.Fatal("the output heard is not the output sent")
	}
	// A watcher who joins now gets what was heard of it.
	if o, ok := feed.OutputSoFar(runID); !ok || o.ToolCallID != "call_1" || o.Offset != 0 || o.Text != whole[:headBytes] {
		t.Fatalf("OutputSoFar = %q at %d (%v), want the first %d bytes of call_1's", o.ToolCallID, o.Offset, ok, headBytes)
	}
	pub.Event(runID, corral.RunEvent{Delta: "thinking"})
	if e, ok := next(t, ch); !ok || e.Delta != "thinking" {
		t.Fatalf("got %+v, want the model's text", e)
	}
	// The command's result: its output is no longer the running one's.
	wantTrace(record(trace.ToolResult))
	if _, ok := feed.OutputSoFar(runID); ok {
		t.Fatal("OutputSoFar after the command's result: want none")
	}
	wantTrace(record(trace.Ended))
	pub.End(runID)
	if e, ok := next(t, ch); ok {
		t.Fatalf("got %+v after the run's end, want the watcher let go", e)
	}

	// The feed's connection is cut: its watchers are let go (they read
	// the store again), and it listens again.
	other := corral.NewID("run")
	ch2, stop2 := feed.Subscribe(other)
	defer stop2()
	var cut int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %'`).Scan(&cut); err != nil || cut != 1 {
		t.Fatalf("cut %d listeners (%v), want 1", cut, err)
	}
	if e, ok := next(t, ch2); ok {
		t.Fatalf("got %+v after the feed's connection was cut, want the watcher let go", e)
	}
	listening(t, admin, 1)
	ch3, stop3 := feed.Subscribe(other)
	defer stop3()
	e, err := trace.NewRecorder(driving, nil).Append(ctx, other, trace.Started, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub.Event(other, corral.RunEvent{Trace: &e})
	if got, ok := next(t, ch3); !ok || got.Trace == nil || got.Trace.Seq != 1 {
		t.Fatalf("after listening again got %+v (open %v), want the run's first event", got, ok)
	}
}

// TestPublisherNeverBlocks: output queued past its bound is dropped and
// counted, while the notices of stored events and ends are all kept.
func TestPublisherNeverBlocks(t *testing.T) {
	p := NewPublisher(nil, quiet) // never sends: nothing runs it
	big := strings.Repeat("x", 64<<10)
	for i := range 64 {
		p.Event("run_1", corral.RunEvent{Output: &corral.RunOutput{ToolCallID: "c", Offset: i * len(big), Text: big}})
		p.Event("run_1", corral.RunEvent{Trace: &trace.Event{Seq: int64(i + 1)}})
	}
	p.End("run_1")
	notices := 0
	for _, n := range p.queue {
		if n.Kind == kindTrace || n.Kind == kindEnd {
			notices++
		}
	}
	if notices != 65 || p.Dropped() != int64(64-maxQueued/len(big)) || p.queued > maxQueued {
		t.Fatalf("%d notices kept, %d pieces dropped, %d bytes queued; want 65, %d, at most %d", notices, p.Dropped(), p.queued, 64-maxQueued/len(big), maxQueued)
	}
}

// TestMerge: neighbours are joined where nothing is lost by it.
func TestMerge(t *testing.T) {
	o := func(run, call string, off int, text string) note {
		return note{Kind: kindOutput, Run: run, Call: call, Offset: off, Text: []byte(text)}
	}
	tr := func(run string, seq int64, typ string) note {
		return note{Kind: kindTrace, Run: run, Seq: seq, Type: typ}
	}
	d := func(run, text string) note { return note{Kind: kindDelta, Run: run, Text: []byte(text)} }
	for _, tc := range []struct {
		name     string
		in, want []note
	}{
		{"output that follows on", []note{o("r", "c", 0, "ab"), o("r", "c", 2, "cd")}, []note{o("r", "c", 0, "abcd")}},
		{"output with a gap", []note{o("r", "c", 0, "ab"), o("r", "c", 5, "cd")}, []note{o("r", "c", 0, "ab"), o("r", "c", 5, "cd")}},
		{"another call's", []note{o("r", "c", 0, "ab"), o("r", "d", 2, "cd")}, []note{o("r", "c", 0, "ab"), o("r", "d", 2, "cd")}},
		{"another run's", []note{o("r", "c", 0, "ab"), o("s", "c", 2, "cd")}, []note{o("r", "c", 0, "ab"), o("s", "c", 2, "cd")}},
		{"text", []note{d("r", "a"), d("r", "b"), d("s", "c")}, []note{d("r", "ab"), d("s", "c")}},
		{"notices: the last says how far", []note{tr("r", 1, trace.Usage), tr("r", 2, trace.Message)}, []note{tr("r", 2, trace.Message)}},
		{"a command's start stays", []note{tr("r", 1, trace.ToolCall), tr("r", 2, trace.Usage)}, []note{tr("r", 1, trace.ToolCall), tr("r", 2, trace.Usage)}},
		{"output between notices stays between", []note{tr("r", 1, trace.Usage), o("r", "c", 0, "x"), tr("r", 2, trace.Usage)},
			[]note{tr("r", 1, trace.Usage), o("r", "c", 0, "x"), tr("r", 2, trace.Usage)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := merge(tc.in)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("merge = %v, want %v", got, tc.want)
			}
		})
	}
}
