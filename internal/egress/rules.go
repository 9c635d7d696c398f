package egress

// This file is the allow-list of an agent's runs (corral.Egress): what a
// valid one is (Normalize), what it grants (Expand, Match, Refusal) and
// whether one is within another (Covers). All of it is pure: the egress
// proxy asks it per connection and per request, the service asks it when
// an agent is saved or created by another.

import (
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"

	"golang.org/x/net/publicsuffix"

	"corral"
)

// The bounds of an allow-list: enough for any real agent, small enough that
// matching a host against every rule costs nothing.
const (
	MaxRules   = 100
	maxPorts   = 16
	maxMethods = 16
	maxPaths   = 32
	maxPathLen = 1024
	maxMethod  = 32
)

// defaultPorts are the ports a rule without Ports allows.
var defaultPorts = []int{80, 443}

// Presets are the well-known registries an agent may name instead of
// spelling their hosts out. HTTPS only, except Debian's mirrors, which apt
// reaches over plain HTTP (its packages are signed).
var Presets = map[string][]corral.EgressRule{
	"npm":    https("registry.npmjs.org"),
	"pypi":   https("pypi.org", "files.pythonhosted.org"),
	"go":     https("proxy.golang.org", "sum.golang.org"),
	"crates": https("crates.io", "index.crates.io", "static.crates.io"),
	"debian": {
		{Host: "deb.debian.org", Ports: []int{80, 443}},
		{Host: "security.debian.org", Ports: []int{80, 443}},
	},
	"github": https("github.com", "api.github.com", "codeload.github.com",
		"objects.githubusercontent.com", "raw.githubusercontent.com"),
}

// https is one rule per host, port 443 only; each rule has its own Ports
// so that no two rules share a slice.
func https(hosts ...string) []corral.EgressRule {
	out := make([]corral.EgressRule, len(hosts))
	for i, h := range hosts {
		out[i] = corral.EgressRule{Host: h, Ports: []int{443}}
	}
	return out
}

// PresetNames are the names of Presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Check reports whether e is a valid allow-list (see Normalize).
func Check(e corral.Egress) error {
	_, err := Normalize(e)
	return err
}

// Normalize checks e and answers it in the form the rest of this file
// compares: hosts lower-cased, without a trailing dot or brackets, IP
// addresses in their canonical form, presets lower-cased and once each.
// EINVALID naming the field (policy.egress.allow[2].host) and what is
// wrong with it.
func Normalize(e corral.Egress) (corral.Egress, error) {
	if len(e.Allow) > MaxRules {
		return corral.Egress{}, corral.Errorf(corral.EINVALID,
			"policy.egress.allow: %d rules, at most %d (a wildcard such as *.example.com covers many hosts)", len(e.Allow), MaxRules)
	}
	var out corral.Egress
	for i, p := range e.Presets {
		name := strings.ToLower(strings.TrimSpace(p))
		if _, ok := Presets[name]; !ok {
			return corral.Egress{}, corral.Errorf(corral.EINVALID,
				"policy.egress.presets[%d]: %q is not a preset (the presets are %s)", i, bounded(p), strings.Join(PresetNames(), ", "))
		}
		if !slices.Contains(out.Presets, name) {
			out.Presets = append(out.Presets, name)
		}
	}
	for i, r := range e.Allow {
		n, field, why := normalizeRule(r)
		if why != "" {
			return corral.Egress{}, corral.Errorf(corral.EINVALID, "policy.egress.allow[%d].%s: %s", i, field, why)
		}
		out.Allow = append(out.Allow, n)
	}
	return out, nil
}

// normalizeRule answers r normalized, or the field that is wrong and why.
func normalizeRule(r corral.EgressRule) (n corral.EgressRule, field, why string) {
	host, why := normalizeHost(r.Host)
	if why != "" {
		return n, "host", why
	}
	n.Host = host
	if len(r.Ports) > maxPorts {
		return n, "ports", fmt.Sprintf("%d ports, at most %d", len(r.Ports), maxPorts)
	}
	for _, p := range r.Ports {
		if p < 1 || p > 65535 {
			return n, "ports", fmt.Sprintf("%d is not a port (1 to 65535)", p)
		}
	}
	n.Ports = slices.Clone(r.Ports)
	if len(r.Methods) > maxMethods {
		return n, "methods", fmt.Sprintf("%d methods, at most %d", len(r.Methods), maxMethods)
	}
	for _, m := range r.Methods {
		if !isMethod(m) {
			return n, "methods", fmt.Sprintf("%q is not an HTTP method in capitals, such as GET or POST", bounded(m))
		}
	}
	n.Methods = slices.Clone(r.Methods)
	if len(r.Paths) > maxPaths {
		return n, "paths", fmt.Sprintf("%d paths, at most %d", len(r.Paths), maxPaths)
	}
	for _, p := range r.Paths {
		if why := checkPathPrefix(p); why != "" {
			return n, "paths", why
		}
	}
	n.Paths = slices.Clone(r.Paths)
	return n, "", ""
}

// normalizeHost answers the canonical form of a rule's host, or why it is
// not one.
func normalizeHost(s string) (string, string) {
	h := strings.ToLower(strings.TrimSpace(s))
	if len(h) > 300 {
		return "", "the host is too long"
	}
	if inner, ok := strings.CutPrefix(h, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		if a, err := netip.ParseAddr(inner); !ok || err != nil || !a.Is6() {
			return "", fmt.Sprintf("%q is not an IPv6 address in brackets", bounded(s))
		}
		h = inner
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", fmt.Sprintf("%q has a zone (%%), which a rule cannot name", bounded(s))
		}
		return a.Unmap().String(), ""
	}
	h = strings.TrimSuffix(h, ".")
	if suffix, ok := strings.CutPrefix(h, "*."); ok {
		if why := checkName(suffix); why != "" {
			return "", fmt.Sprintf("%q: %s", bounded(s), why)
		}
		// A wildcard over a public suffix (*.com, *.co.uk) would allow
		// every site under it: the suffix must be a domain someone owns.
		// Only the ICANN part of the list counts, so *.githubusercontent.com
		// (a private entry) stays allowed.
		if ps, icann := publicsuffix.PublicSuffix(suffix); (icann && ps == suffix) || !strings.Contains(suffix, ".") {
			return "", fmt.Sprintf("%q covers a whole public suffix; name a domain under it, such as *.example.com", bounded(s))
		}
		return h, ""
	}
	if strings.Contains(h, "*") {
		return "", fmt.Sprintf("%q: a wildcard is allowed only as the first label (*.example.com)", bounded(s))
	}
	if why := checkName(h); why != "" {
		return "", fmt.Sprintf("%q: %s", bounded(s), why)
	}
	return h, ""
}

// checkName says why s (lower-cased) is not a DNS name, or "".
func checkName(s string) string {
	if s == "" {
		return "the host is empty"
	}
	if len(s) > 253 {
		return "a host name is at most 253 characters"
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "each label of a host name is 1 to 63 characters"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "a host name has only letters, digits, hyphens and dots"
			}
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "a label of a host name does not start or end with a hyphen"
		}
	}
	// Resolvers read some all-digit names as an address ("127.1"): no
	// top-level domain is all digits, so such a name is refused.
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "a host name's last label is not all digits (write an IP address in full)"
	}
	return ""
}

// isMethod: an upper-case HTTP token, so GET and get are not two rules
// that look alike.
func isMethod(m string) bool {
	if m == "" || len(m) > maxMethod || m[0] < 'A' || m[0] > 'Z' {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// checkPathPrefix says why p cannot be a rule's path prefix, or "". A
// prefix is compared with a request's decoded, cleaned path, so it must be
// written decoded and clean itself, or it would never match.
func checkPathPrefix(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf("%q does not start with /", bounded(p))
	case len(p) > maxPathLen:
		return fmt.Sprintf("a path is at most %d characters", maxPathLen)
	case strings.ContainsAny(p, "?#%\\"):
		return fmt.Sprintf("%q has a ?, #, %% or \\; a path prefix is written decoded, without a query", bounded(p))
	case strings.IndexFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return fmt.Sprintf("%q has a space or a control character", bounded(p))
	case cleanPath(p) != p:
		return fmt.Sprintf("%q is not a clean path (no . or .. segments, no //): write %q", bounded(p), cleanPath(p))
	}
	return ""
}

// bounded shortens what a person typed before it goes into a message.
func bounded(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Expand is every rule e grants: its presets' rules, then its own. A
// preset that does not exist grants nothing (Check refuses it). The rules
// are copies: changing them does not change Presets.
func Expand(e corral.Egress) []corral.EgressRule {
	var out []corral.EgressRule
	for _, name := range e.Presets {
		for _, r := range Presets[strings.ToLower(name)] {
			r.Ports = slices.Clone(r.Ports)
			out = append(out, r)
		}
	}
	return append(out, e.Allow...)
}

// CanonicalHost is host as rules compare it: lower-case, without a
// trailing dot or brackets, an IP address in its canonical form.
func CanonicalHost(host string) string {
	h := strings.ToLower(host)
	if inner, ok := strings.CutPrefix(h, "["); ok {
		h = strings.TrimSuffix(inner, "]")
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return strings.TrimSuffix(h, ".")
}

// MatchHost reports whether pattern (a rule's host) covers host. An IP
// address matches only the same address: allowing a name does not allow
// the addresses it resolves to, so a client cannot pick one of a shared
// front end's addresses and name another site in it.
func MatchHost(pattern, host string) bool {
	pattern, host = CanonicalHost(pattern), CanonicalHost(host)
	if host == "" || pattern == "" {
		return false
	}
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		if _, err := netip.ParseAddr(host); err == nil {
			return false
		}
		return strings.HasSuffix(host, "."+suffix)
	}
	return pattern == host
}

// Match answers the first rule that allows host on port.
func Match(rules []corral.EgressRule, host string, port int) (corral.EgressRule, bool) {
	for _, r := range rules {
		if MatchHost(r.Host, host) && slices.Contains(portsOf(r), port) {
			return r, true
		}
	}
	return corral.EgressRule{}, false
}

func portsOf(r corral.EgressRule) []int {
	if len(r.Ports) == 0 {
		return defaultPorts
	}
	return r.Ports
}

// Permits reports whether r allows a request of method for target (a
// request-target in origin form: a path, perhaps with a query).
func Permits(r corral.EgressRule, method, target string) bool {
	return Refusal(r, method, target) == ""
}

// Refusal says why r does not allow a request of method for target, in
// words for the person who reads the run's record; "" when it does.
func Refusal(r corral.EgressRule, method, target string) string {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
		return fmt.Sprintf("%s is not among the methods the rule for %s allows (%s)", bounded(method), r.Host, strings.Join(r.Methods, ", "))
	}
	if len(r.Paths) == 0 {
		return ""
	}
	p, why := requestPath(target)
	if why != "" {
		return why
	}
	// A prefix must hold of the path as sent and as cleaned: a server that
	// resolves dot segments sees the one, a server that does not sees the
	// other, and either way the request stays under the prefix.
	c := cleanPath(p)
	for _, q := range r.Paths {
		if under(q, p) && under(q, c) {
			return ""
		}
	}
	return fmt.Sprintf("%q is not under the paths the rule for %s allows (%s)", bounded(p), r.Host, strings.Join(r.Paths, ", "))
}

// requestPath is the decoded path of an origin-form request-target, or why
// the proxy will not read one. An encoded /, \ or . is refused: a server
// may split or resolve the path before decoding it or after, and the two
// readings could name different places.
func requestPath(target string) (string, string) {
	raw, _, _ := strings.Cut(target, "?")
	raw, _, _ = strings.Cut(raw, "#")
	if !strings.HasPrefix(raw, "/") {
		return "", fmt.Sprintf("the request is not for a path (%q)", bounded(raw))
	}
	lower := strings.ToLower(raw)
	if strings.Contains(raw, "\\") || strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c") || strings.Contains(lower, "%2e") {
		return "", fmt.Sprintf("the path %q has an encoded /, \\ or ., which a rule with paths does not allow", bounded(raw))
	}
	p, err := url.PathUnescape(raw)
	if err != nil || strings.IndexFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
		return "", fmt.Sprintf("the path %q is not well formed", bounded(raw))
	}
	return p, ""
}

// cleanPath is path.Clean keeping a trailing slash, which a prefix such as
// "/a/" depends on.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// under reports whether the prefix q covers path p: "/a" covers "/a" and
// "/a/b" but not "/ab"; "/a/" covers everything that starts with it.
func under(q, p string) bool {
	if strings.HasSuffix(q, "/") {
		return strings.HasPrefix(p, q)
	}
	return p == q || strings.HasPrefix(p, q+"/")
}

// Covers reports whether everything child grants, parent grants too, so
// that an agent a run creates never reaches further than the agent of the
// run. Each rule of the child, port by port, must fall within one rule of
// the parent; a child that a union of the parent's rules would cover only
// together is refused, which errs on the narrow side.
func Covers(parent, child corral.Egress) bool {
	ps := Expand(parent)
	for _, c := range Expand(child) {
		for _, port := range portsOf(c) {
			if !slices.ContainsFunc(ps, func(p corral.EgressRule) bool { return ruleCovers(p, c, port) }) {
				return false
			}
		}
	}
	return true
}

// ruleCovers reports whether p allows all that c allows on port.
func ruleCovers(p, c corral.EgressRule, port int) bool {
	if !hostCovers(p.Host, c.Host) || !slices.Contains(portsOf(p), port) {
		return false
	}
	if len(p.Methods) > 0 {
		if len(c.Methods) == 0 {
			return false
		}
		for _, m := range c.Methods {
			if !slices.Contains(p.Methods, m) {
				return false
			}
		}
	}
	if len(p.Paths) > 0 {
		if len(c.Paths) == 0 {
			return false
		}
		for _, cp := range c.Paths {
			if !slices.ContainsFunc(p.Paths, func(pp string) bool { return under(pp, cp) }) {
				return false
			}
		}
	}
	return true
}

// hostCovers: the same host, or a parent wildcard over the child's host or
// over the child's own (narrower or equal) wildcard.
func hostCovers(parent, child string) bool {
	parent, child = CanonicalHost(parent), CanonicalHost(child)
	if parent == child {
		return parent != ""
	}
	if c, ok := strings.CutPrefix(child, "*."); ok {
		p, ok := strings.CutPrefix(parent, "*.")
		return ok && strings.HasSuffix(c, "."+p)
	}
	return MatchHost(parent, child)
}
