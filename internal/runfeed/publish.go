package runfeed

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"corral"
)

// Notifier sends notifications: the store (store.DB.Notify).
type Notifier interface {
	Notify(ctx context.Context, channel string, payloads []string) error
}

const (
	// maxQueued bounds the output and model text waiting to be sent, in
	// bytes: past it, more is dropped (the trace, stored, is never).
	maxQueued = 1 << 20
	// chunk is the most output or text one notification carries: its
	// base64 and the rest stay under PostgreSQL's 8000 bytes.
	chunk = 4 << 10
	// retry is how long a failed send waits before the next try.
	retry = time.Second
)

// Publisher sends a control's runs' events as notifications, in the
// order they happened, batched: one round trip carries whatever queued
// up meanwhile. Its Event and End never block the run.
type Publisher struct {
	db  Notifier
	log *slog.Logger

	mu     sync.Mutex
	queue  []note
	queued int // bytes of output and text in queue
	wake   chan struct{}

	dropped atomic.Int64 // output and text notes dropped, for the operator
}

// NewPublisher returns a Publisher sending through db; Run sends.
func NewPublisher(db Notifier, log *slog.Logger) *Publisher {
	return &Publisher{db: db, log: log, wake: make(chan struct{}, 1)}
}

// Event queues a run's event (the runner's Relay).
func (p *Publisher) Event(runID string, e corral.RunEvent) {
	n, ok := noteOf(runID, e)
	if ok {
		p.add(n)
	}
}

// End queues a run's end: its final status is stored.
func (p *Publisher) End(runID string) { p.add(note{Kind: kindEnd, Run: runID}) }

// Dropped is how many pieces of output or text were dropped so far.
func (p *Publisher) Dropped() int64 { return p.dropped.Load() }

func (p *Publisher) add(n note) {
	p.mu.Lock()
	if len(n.Text) > 0 {
		if p.queued+len(n.Text) > maxQueued {
			p.mu.Unlock()
			p.dropped.Add(1)
			return
		}
		p.queued += len(n.Text)
	}
	p.queue = append(p.queue, n)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run sends what is queued until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		p.mu.Lock()
		batch := p.queue
		p.queue, p.queued = nil, 0
		p.mu.Unlock()
		for len(batch) > 0 {
			err := p.db.Notify(ctx, Channel, p.payloads(merge(batch)))
			if err == nil || ctx.Err() != nil {
				break
			}
			// Output and text are worth little late; the notices of
			// stored events and ends are tried again.
			p.log.Warn("could not send runs' events to the other controls; trying again", "err", err)
			batch = kept(batch)
			if !sleep(ctx, retry) {
				return
			}
		}
	}
}

// merge joins neighbours: pieces of one call's output that follow on,
// a run's pieces of text, and a run's trace notices (the last says how
// far to read).
func merge(batch []note) []note {
	var out []note
	for _, n := range batch {
		if len(out) > 0 {
			last := &out[len(out)-1]
			switch {
			case n.Run != last.Run || n.Kind != last.Kind:
			case n.Kind == kindOutput && n.Call == last.Call && n.Offset == last.Offset+len(last.Text),
				n.Kind == kindDelta:
				last.Text = append(last.Text, n.Text...)
				continue
			case n.Kind == kindTrace && !endsOutput(last.Type):
				*last = n
				continue
			}
		}
		if len(n.Text) > 0 {
			n.Text = append([]byte(nil), n.Text...) // merged into, never the caller's
		}
		out = append(out, n)
	}
	return out
}

// payloads encodes notes, a long piece of output or text split in
// chunks. A note that cannot fit (a tool call id of kilobytes) is
// dropped.
func (p *Publisher) payloads(notes []note) []string {
	var out []string
	for _, n := range notes {
		for {
			piece, cut := n, cutAt(n.Text)
			piece.Text = n.Text[:cut]
			s, err := piece.encode()
			if err != nil || len(s) > maxPayload {
				p.dropped.Add(1)
				break
			}
			out = append(out, s)
			if cut == len(n.Text) {
				break
			}
			n.Text = n.Text[cut:]
			if n.Kind == kindOutput {
				n.Offset += cut
			}
		}
	}
	return out
}

// cutAt is where a chunk of text ends: at most chunk bytes in, before
// the rune that would straddle it (each chunk is shown on its own).
func cutAt(text []byte) int {
	if len(text) <= chunk {
		return len(text)
	}
	cut := chunk
	for cut > chunk-utf8.UTFMax && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return cut
}

// maxPayload is PostgreSQL's bound on a notification (store.MaxNotification).
const maxPayload = 7999

// kept is what of a batch is sent again after a failure: the notices.
func kept(batch []note) []note {
	var out []note
	for _, n := range batch {
		if n.Kind == kindTrace || n.Kind == kindEnd {
			out = append(out, n)
		}
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
