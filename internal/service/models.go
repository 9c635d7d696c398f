package service

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// ModelSource is the model gateway as the model picker needs it: whether a
// provider is configured, the model a call of an agent set to model is made
// with, and the models the provider lists (gateway.Gateway).
type ModelSource interface {
	Configured() error
	ModelName(model string) string
	ListModels(ctx context.Context) ([]string, error)
}

// How long the provider's list is kept, and how long one asking for it may
// take: the agent form waits for it.
const (
	modelsFresh   = 5 * time.Minute
	modelsTimeout = 5 * time.Second
)

// Models answers which models an agent may be set to.
type Models struct {
	src ModelSource
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	listed []string // the provider's last list
	at     time.Time
}

// NewModels returns the model use cases over the gateway. It logs to log
// (nil: nowhere) why a provider's list could not be had: the picker only
// says that it could not.
func NewModels(src ModelSource, log *slog.Logger) *Models {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Models{src: src, log: log, now: time.Now}
}

// ModelList is what the model picker offers. It never holds the provider's
// address or key.
type ModelList struct {
	// Models are the server's default model first, then the others the
	// provider lists. Empty when no provider is configured.
	Models []string
	// Default is the model of an agent whose model is "" ("" when the
	// server names none).
	Default    string
	Configured bool
	// Listed says the provider answered its list of models; when it did
	// not, Models holds only the default (and any other name may still be
	// typed).
	Listed bool
}

// List returns the models. Any signed-in user may ask: it says nothing
// about anyone's agents. The provider's list is asked at most every
// modelsFresh while it answers; a provider that does not is asked again
// on the next List.
func (m *Models) List(ctx context.Context) ModelList {
	if m.src.Configured() != nil {
		return ModelList{Models: []string{}}
	}
	def := m.src.ModelName("")
	l := ModelList{Models: []string{}, Default: def, Configured: true}
	if def != "" {
		l.Models = append(l.Models, def)
	}
	names, err := m.providerList(ctx)
	if err != nil {
		m.log.Warn("the model provider did not list its models", "err", err)
		return l
	}
	l.Listed = true
	for _, n := range names {
		if n != def {
			l.Models = append(l.Models, n)
		}
	}
	return l
}

func (m *Models) providerList(ctx context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.listed != nil && m.now().Sub(m.at) < modelsFresh {
		return m.listed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, modelsTimeout)
	defer cancel()
	names, err := m.src.ListModels(ctx)
	if err != nil {
		return nil, err
	}
	if names == nil {
		names = []string{}
	}
	m.listed, m.at = names, m.now()
	return names, nil
}
