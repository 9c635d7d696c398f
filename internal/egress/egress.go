// Package egress decides where the server may connect on a person's
// behalf: a repository to clone from or push to today, an agent's
// allowed hosts later. Private, loopback, link-local and other
// non-public destinations are refused unless the operator allowed their
// range (--egress-allow-private), so that a URL cannot make the server
// reach what sits beside it (a metadata service, an admin port on
// loopback, a host of the private network). A name is resolved here, once,
// and the caller connects to the address this answers (pinned), so a
// second resolution cannot point the connection elsewhere.
package egress

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"corral"
)

// Policy is what may be reached. The zero Policy reaches public
// addresses only.
type Policy struct {
	// AllowPrivate are the non-public ranges that may be reached all the
	// same (an internal git server, a registry mirror).
	AllowPrivate []netip.Prefix
	// Resolver resolves names; nil is net.DefaultResolver.
	Resolver *net.Resolver
}

// ParsePrefixes reads a comma-separated list of CIDR ranges or single
// addresses (for --egress-allow-private).
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, corral.Errorf(corral.EINVALID, "%q is not a CIDR range (such as 10.20.0.0/16) or an address", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// nonPublic are the ranges no destination is in unless allowed: this
// network, private (RFC 1918, unique local), shared address space (CGNAT),
// loopback, link-local (cloud metadata services live there), benchmarking,
// documentation, multicast and reserved ranges.
var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15",
		"198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Allowed reports whether a connection to addr may be made.
func (p Policy) Allowed(addr netip.Addr) bool {
	addr = addr.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	for _, a := range p.AllowPrivate {
		if a.Contains(addr) {
			return true
		}
	}
	if !addr.IsValid() || addr.Zone() != "" {
		return false
	}
	for _, n := range nonPublic {
		if n.Contains(addr) {
			return false
		}
	}
	return true
}

// Resolve answers the address to connect to for host (a name or an IP
// address): the first one it resolves to that Allowed takes. EFORBIDDEN,
// saying so, when it resolves only to refused ones; EUNAVAIL when it
// does not resolve (the caller's uniform network failure).
func (p Policy) Resolve(ctx context.Context, host string) (netip.Addr, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		r := p.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		addrs, err = r.LookupNetIP(ctx, "ip", host)
		if err != nil || len(addrs) == 0 {
			return netip.Addr{}, &corral.Error{Code: corral.EUNAVAIL, Op: "egress.Resolve", Err: err,
				Message: "the host could not be resolved"}
		}
	}
	for _, a := range addrs {
		if p.Allowed(a) {
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, corral.Errorf(corral.EFORBIDDEN,
		"%s is a private, loopback or link-local address, which this server does not connect to (an operator may allow its range with --egress-allow-private)", nameOrAddress(host))
}

// nameOrAddress says what was refused without repeating what a name
// resolved to.
func nameOrAddress(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	return "the host " + host + " resolves only to an address that"
}
