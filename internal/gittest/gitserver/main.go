// Command gitserver serves gittest's git server (git http-backend over TLS,
// behind basic auth) on a loopback port, for tests that drive a real
// `corral serve` from outside Go (the browser tests). It prints one line,
//
//	gitserver listening <repository URL> ca=<PEM file> bare=<bare repository>
//
// on stdout, and serves until it is signalled; then it removes what it
// made. The repository holds one commit with a README.md on main.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"corral/internal/gittest"
)

func main() {
	user := flag.String("user", "git", "basic auth user name")
	password := flag.String("password", "", "basic auth password (required)")
	flag.Parse()
	if *password == "" {
		log.Fatal("gitserver: --password is required")
	}
	base, err := os.MkdirTemp("", "gitserver-")
	if err != nil {
		log.Fatal(err)
	}
	t := &stand{base: base}
	defer t.cleanup()
	s := gittest.New(t, gittest.Options{User: *user, Password: *password})
	fmt.Printf("gitserver listening %s ca=%s bare=%s\n", s.URL(), s.CAFile, s.Bare)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}

// stand is gittest.T outside a test: temporary directories under base,
// clean-ups run at exit, and any failure ends the process.
type stand struct {
	base     string
	n        int
	cleanups []func()
}

func (s *stand) Helper() {}

func (s *stand) TempDir() string {
	s.n++
	d := fmt.Sprintf("%s/%d", s.base, s.n)
	if err := os.Mkdir(d, 0o755); err != nil {
		s.Fatal(err)
	}
	return d
}

func (s *stand) Fatal(args ...any) {
	s.cleanup()
	log.Fatal(append([]any{"gitserver: "}, args...)...)
}

func (s *stand) Fatalf(format string, args ...any) { s.Fatal(fmt.Sprintf(format, args...)) }
func (s *stand) Skip(args ...any)                  { s.Fatal(args...) }
func (s *stand) Cleanup(f func())                  { s.cleanups = append(s.cleanups, f) }

func (s *stand) cleanup() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
	s.cleanups = nil
	os.RemoveAll(s.base)
}
