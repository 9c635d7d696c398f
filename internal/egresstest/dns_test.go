package egresstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestResolver(t *testing.T) {
	res := Resolver(map[string]netip.Addr{
		"registry.corral.test": netip.MustParseAddr("127.0.0.1"),
		"Mixed.Corral.Test.":   netip.MustParseAddr("127.0.0.2"),
		"six.corral.test":      netip.MustParseAddr("::1"),
		"mapped.corral.test":   netip.MustParseAddr("::ffff:127.0.0.3"),
	})
	tests := []struct {
		name, network, host string
		want                []netip.Addr // nil: not found
	}{
		{"known", "ip", "registry.corral.test", addrs("127.0.0.1")},
		{"trailing dot", "ip", "registry.corral.test.", addrs("127.0.0.1")},
		{"other case", "ip", "REGISTRY.corral.TEST", addrs("127.0.0.1")},
		{"map key with case and dot", "ip", "mixed.corral.test", addrs("127.0.0.2")},
		{"ipv4 only asked ip4", "ip4", "registry.corral.test", addrs("127.0.0.1")},
		{"ipv4 only asked ip6", "ip6", "registry.corral.test", nil},
		{"ipv6 only", "ip", "six.corral.test", addrs("::1")},
		{"ipv6 only asked ip4", "ip4", "six.corral.test", nil},
		{"mapped address is ipv4", "ip", "mapped.corral.test", addrs("127.0.0.3")},
		{"unknown", "ip", "elsewhere.corral.test", nil},
		{"unknown public name", "ip", "registry.npmjs.org", nil},
		{"parent of a known name", "ip", "corral.test", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := res.LookupNetIP(ctx, tt.network, tt.host)
			if tt.want == nil {
				var dnsErr *net.DNSError
				if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
					t.Fatalf("LookupNetIP(%q, %q) = %v, %v; want a not-found *net.DNSError", tt.network, tt.host, got, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("LookupNetIP(%q, %q) = %v, %v; want %v", tt.network, tt.host, got, err, tt.want)
			}
		})
	}
}

// TestResolverConcurrent checks that parallel lookups, as a proxy serving
// several connections makes, each get their own answer.
func TestResolverConcurrent(t *testing.T) {
	names := map[string]netip.Addr{}
	for i := range 16 {
		names[fmt.Sprintf("host%d.corral.test", i)] = netip.AddrFrom4([4]byte{127, 0, 1, byte(i)})
	}
	res := Resolver(names)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 128 {
		wg.Go(func() {
			host := fmt.Sprintf("host%d.corral.test", i%16)
			if i%5 == 0 {
				host = fmt.Sprintf("missing%d.corral.test", i)
			}
			got, err := res.LookupNetIP(ctx, "ip", host)
			want, known := names[host]
			switch {
			case !known && err == nil:
				t.Errorf("LookupNetIP(%q) = %v, want not found", host, got)
			case known && (err != nil || len(got) != 1 || got[0] != want):
				t.Errorf("LookupNetIP(%q) = %v, %v; want %v", host, got, err, want)
			}
		})
	}
	wg.Wait()
}

func addrs(list ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range list {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
