package main

import (
	"io"
	"strings"
	"testing"

	"corral/internal/netguard"
)

func TestServeLimitFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		conns   int
		perAddr int
		proxies string
		maxSess int
		err     string // a substring of the error; "" for none
	}{
		{name: "defaults", conns: 0, perAddr: netguard.DefaultMaxConnsPerAddr},
		{name: "flags", args: []string{"--max-conns", "500", "--max-conns-per-addr", "0"}, conns: 500, perAddr: 0},
		{name: "environment", env: map[string]string{"CORRAL_MAX_CONNS": "700", "CORRAL_MAX_CONNS_PER_ADDR": "16"}, conns: 700, perAddr: 16},
		{name: "a flag beats the environment", args: []string{"--max-conns-per-addr", "32"}, env: map[string]string{"CORRAL_MAX_CONNS_PER_ADDR": "16"}, perAddr: 32},
		{name: "proxies repeated and comma-separated", args: []string{"--trusted-proxy", "10.0.0.0/8, 192.0.2.1", "--trusted-proxy", "2001:db8::/32"},
			perAddr: netguard.DefaultMaxConnsPerAddr, proxies: "10.0.0.0/8,192.0.2.1/32,2001:db8::/32"},
		{name: "proxies from the environment", env: map[string]string{"CORRAL_TRUSTED_PROXY": "172.16.0.0/12,fd00::1"},
			perAddr: netguard.DefaultMaxConnsPerAddr, proxies: "172.16.0.0/12,fd00::1/128"},
		{name: "proxy flags replace the environment's", args: []string{"--trusted-proxy", "10.1.0.0/16"}, env: map[string]string{"CORRAL_TRUSTED_PROXY": "172.16.0.0/12"},
			perAddr: netguard.DefaultMaxConnsPerAddr, proxies: "10.1.0.0/16"},
		{name: "a CIDR's host bits are dropped", args: []string{"--trusted-proxy", "10.1.2.3/16"}, perAddr: netguard.DefaultMaxConnsPerAddr, proxies: "10.1.0.0/16"},
		{name: "not a CIDR", args: []string{"--trusted-proxy", "proxy.internal"}, err: "neither a CIDR nor an address"},
		{name: "not a CIDR in the environment", env: map[string]string{"CORRAL_TRUSTED_PROXY": "10.0.0.0/33"}, err: "CORRAL_TRUSTED_PROXY"},
		{name: "negative cap", args: []string{"--max-conns-per-addr", "-1"}, err: "must not be negative"},
		{name: "cap not a number", env: map[string]string{"CORRAL_MAX_CONNS": "lots"}, err: "CORRAL_MAX_CONNS"},
		{name: "max sessions", args: []string{"--max-sessions", "8"}, perAddr: netguard.DefaultMaxConnsPerAddr, maxSess: 8},
		{name: "max sessions from the environment", env: map[string]string{"CORRAL_MAX_SESSIONS": "3"}, perAddr: netguard.DefaultMaxConnsPerAddr, maxSess: 3},
		{name: "negative max sessions", args: []string{"--max-sessions", "-2"}, err: "--max-sessions must not be negative"},
		{name: "max sessions not a number", env: map[string]string{"CORRAL_MAX_SESSIONS": "many"}, err: "CORRAL_MAX_SESSIONS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServe(tt.args, io.Discard, func(k string) string { return tt.env[k] })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseServe(%q) error = %v, want one saying %q", tt.args, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServe(%q): %v", tt.args, err)
			}
			got := (&prefixList{list: c.TrustedProxies}).String()
			if c.MaxConns != tt.conns || c.MaxConnsPerAddr != tt.perAddr || got != tt.proxies || c.MaxSessions != tt.maxSess {
				t.Fatalf("parseServe(%q) = max-conns %d, per-addr %d, proxies %q, max-sessions %d; want %d, %d, %q, %d",
					tt.args, c.MaxConns, c.MaxConnsPerAddr, got, c.MaxSessions, tt.conns, tt.perAddr, tt.proxies, tt.maxSess)
			}
		})
	}
}
