//go:build !linux

package sandbox

import (
	"io"
	"time"

	"corral"
)

// Config is how this server runs sandboxes (unused off Linux).
type Config struct {
	HostUID, HostGID int
	InitPath         string
	Grace, Poll      time.Duration
	Probed           bool
}

// Sandbox is never started off Linux.
type Sandbox struct{}

func unavailable() error {
	return corral.Errorf(corral.EUNAVAIL, "sandbox unavailable: Corral's sandbox needs Linux (namespaces, Landlock, seccomp, cgroups)")
}

// Available always fails off Linux: there is no weaker mode.
func Available() error { return unavailable() }

// Start refuses to run off Linux.
func Start(Config, Spec, io.Reader, io.Writer, io.Writer) (*Sandbox, error) {
	return nil, unavailable()
}

// Run refuses to run off Linux.
func Run(Config, Spec, io.Reader, io.Writer, io.Writer) (Result, error) {
	return Result{}, unavailable()
}

// Init is never reached off Linux.
func Init() { panic("sandbox: Init off Linux") }

func (s *Sandbox) Wait() (Result, error) { return Result{}, unavailable() }
func (s *Sandbox) Stop(time.Duration)    {}
func (s *Sandbox) Kill()                 {}
func (s *Sandbox) Done() <-chan struct{} { c := make(chan struct{}); close(c); return c }
