package runfeed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"corral"
	"corral/internal/fanout"
	"corral/internal/store"
)

// readTimeout bounds one read of a run's new trace events.
const readTimeout = 10 * time.Second

// Feed hands the runs' events other controls publish to this control's
// watchers. It implements what service.Runs.Watch needs of an engine:
// Subscribe and OutputSoFar. Run listens.
type Feed struct {
	db  *store.DB
	log *slog.Logger

	hub *fanout.Hub // the watchers

	mu   sync.Mutex
	last map[string]int64   // per run watched: the last trace event handed on
	out  map[string]*output // per run: the running command's output, as heard
}

// output is a command's output as a Feed heard it: from its byte start
// (0 unless this Feed started listening while it ran), its first
// headBytes.
type output struct {
	call  string
	start int
	text  []byte
}

// NewFeed returns a Feed on db's notifications; Run listens.
func NewFeed(db *store.DB, log *slog.Logger) *Feed {
	return &Feed{db: db, log: log, hub: fanout.New(), last: map[string]int64{}, out: map[string]*output{}}
}

// Run listens until ctx ends, connecting again when its connection
// breaks. Each time it starts listening, every watcher is let go to read
// the store afresh: what was sent while it did not listen is there.
func (f *Feed) Run(ctx context.Context) {
	said := false
	for ctx.Err() == nil {
		l, err := f.db.Listen(ctx, Channel)
		if err != nil {
			if ctx.Err() == nil && !said {
				f.log.Warn("cannot listen for runs' events from the other controls; trying again", "err", err)
				said = true
			}
			sleep(ctx, retry)
			continue
		}
		said = false
		f.reset()
		err = f.listen(ctx, l)
		l.Close(context.WithoutCancel(ctx))
		if ctx.Err() == nil {
			f.log.Warn("stopped listening for runs' events from the other controls; listening again", "err", err)
		}
	}
}

func (f *Feed) listen(ctx context.Context, l *store.Listener) error {
	for {
		payload, err := l.Next(ctx)
		if err != nil {
			return err
		}
		n, err := decode(payload)
		if err != nil || n.Run == "" {
			f.log.Warn("a notification of runs' events not understood", "err", err)
			continue
		}
		f.handle(ctx, n)
	}
}

// reset lets every watcher go (they read the store again) and forgets
// what was heard: notifications may have been missed.
func (f *Feed) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hub.EndAll()
	clear(f.last)
	clear(f.out)
}

func (f *Feed) handle(ctx context.Context, n note) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch n.Kind {
	case kindTrace:
		if endsOutput(n.Type) {
			delete(f.out, n.Run)
		}
		if !f.hub.Watched(n.Run) {
			delete(f.last, n.Run)
			return
		}
		// The first notice since the run was watched reads its whole
		// trace: a notice may stand for several events (the publisher
		// merges neighbours), and a watcher may have read the store
		// before the first of them was stored. Watchers skip what they
		// have.
		after := f.last[n.Run]
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		events, err := f.db.TraceAfter(rctx, n.Run, after)
		cancel()
		if err != nil {
			f.hub.End(n.Run) // its watchers read the store themselves
			delete(f.last, n.Run)
			return
		}
		for i := range events {
			f.hub.Publish(n.Run, corral.RunEvent{Trace: &events[i]})
			f.last[n.Run] = events[i].Seq
		}
	case kindOutput:
		o := f.out[n.Run]
		switch {
		case o == nil || o.call != n.Call || n.Offset < o.start:
			f.out[n.Run] = &output{call: n.Call, start: n.Offset, text: head(nil, n.Text)}
		case n.Offset == o.start+len(o.text):
			o.text = head(o.text, n.Text)
		}
		f.hub.Publish(n.Run, corral.RunEvent{Output: &corral.RunOutput{ToolCallID: n.Call, Offset: n.Offset, Text: string(n.Text)}})
	case kindDelta:
		f.hub.Publish(n.Run, corral.RunEvent{Delta: string(n.Text)})
	case kindEnd:
		f.hub.End(n.Run)
		delete(f.last, n.Run)
		delete(f.out, n.Run)
	}
}

// head appends to b what of more fits in headBytes.
func head(b, more []byte) []byte {
	return append(b, more[:min(len(more), max(headBytes-len(b), 0))]...)
}

// Subscribe registers a watcher of runID. Its channel closes when the
// run ends, when the watcher falls too far behind, when notifications
// may have been missed, or when cancel is called: the watcher then reads
// the store and subscribes again.
func (f *Feed) Subscribe(runID string) (<-chan corral.RunEvent, func()) {
	return f.hub.Subscribe(runID)
}

// OutputSoFar is the running command's output as this Feed heard it:
// its first bytes, from where it began listening.
func (f *Feed) OutputSoFar(runID string) (corral.RunOutput, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.out[runID]
	if o == nil {
		return corral.RunOutput{}, false
	}
	return corral.RunOutput{ToolCallID: o.call, Offset: o.start, Text: string(o.text)}, true
}
