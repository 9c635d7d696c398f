package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// TestParseWithEnv: a flag's variable fills it when the command line does
// not; the command line wins; a bad value names its variable; with only,
// other flags have no variable.
func TestParseWithEnv(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		only      []string
		conns     int
		data      string
		err, from string // from: what the errors name conns by
	}{
		{name: "defaults", conns: 1, data: "./data", from: "--max-conns"},
		{name: "from the environment", env: map[string]string{"CORRAL_MAX_CONNS": "7"}, conns: 7, data: "./data", from: "CORRAL_MAX_CONNS"},
		{name: "the command line wins", args: []string{"--max-conns", "9"}, env: map[string]string{"CORRAL_MAX_CONNS": "7"}, conns: 9, data: "./data", from: "--max-conns"},
		{name: "a bad value names its variable", env: map[string]string{"CORRAL_MAX_CONNS": "many"}, err: `CORRAL_MAX_CONNS="many"`},
		{name: "only the named flags", env: map[string]string{"CORRAL_MAX_CONNS": "7", "CORRAL_DATA": "/srv"}, only: []string{"data"}, conns: 1, data: "/srv", from: "--max-conns"},
		{name: "an extra argument", args: []string{"x"}, err: `unexpected argument "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			conns := fs.Int("max-conns", 1, "")
			data := fs.String("data", "./data", "")
			from, err := parseWithEnv(fs, tt.args, func(k string) string { return tt.env[k] }, tt.only...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, errUsage) {
					t.Fatalf("parseWithEnv = %v, want a usage error saying %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *conns != tt.conns || *data != tt.data || from("max-conns") != tt.from {
				t.Fatalf("max-conns %d, data %q, from %q; want %d, %q, %q", *conns, *data, from("max-conns"), tt.conns, tt.data, tt.from)
			}
		})
	}
}
