package egress

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"corral"
)

func rule(host string) corral.EgressRule { return corral.EgressRule{Host: host} }

func TestNormalizeAccepts(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   corral.Egress
		want corral.Egress
	}{
		{"empty", corral.Egress{}, corral.Egress{}},
		{"a name, lower-cased, without its trailing dot",
			corral.Egress{Allow: []corral.EgressRule{rule(" Registry.NPMjs.org. ")}},
			corral.Egress{Allow: []corral.EgressRule{rule("registry.npmjs.org")}}},
		{"a single-label name", corral.Egress{Allow: []corral.EgressRule{rule("mirror")}}, corral.Egress{Allow: []corral.EgressRule{rule("mirror")}}},
		{"an IPv4 address", corral.Egress{Allow: []corral.EgressRule{rule("10.0.0.5")}}, corral.Egress{Allow: []corral.EgressRule{rule("10.0.0.5")}}},
		{"an IPv6 address in brackets, canonical",
			corral.Egress{Allow: []corral.EgressRule{rule("[2001:DB8:0::1]")}},
			corral.Egress{Allow: []corral.EgressRule{rule("2001:db8::1")}}},
		{"an IPv4-mapped address is the IPv4 one",
			corral.Egress{Allow: []corral.EgressRule{rule("::ffff:10.0.0.5")}},
			corral.Egress{Allow: []corral.EgressRule{rule("10.0.0.5")}}},
		{"a wildcard", corral.Egress{Allow: []corral.EgressRule{rule("*.Example.com")}}, corral.Egress{Allow: []corral.EgressRule{rule("*.example.com")}}},
		{"a wildcard under a private public suffix", corral.Egress{Allow: []corral.EgressRule{rule("*.githubusercontent.com")}}, corral.Egress{Allow: []corral.EgressRule{rule("*.githubusercontent.com")}}},
		{"ports, methods and paths",
			corral.Egress{Allow: []corral.EgressRule{{Host: "api.example.com", Ports: []int{443, 8443}, Methods: []string{"GET", "M-SEARCH"}, Paths: []string{"/", "/v1/", "/a"}}}},
			corral.Egress{Allow: []corral.EgressRule{{Host: "api.example.com", Ports: []int{443, 8443}, Methods: []string{"GET", "M-SEARCH"}, Paths: []string{"/", "/v1/", "/a"}}}}},
		{"presets lower-cased, once each",
			corral.Egress{Presets: []string{"NPM", "go", "npm"}},
			corral.Egress{Presets: []string{"npm", "go"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.in)
			if err != nil {
				t.Fatalf("Normalize(%+v): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Normalize(%+v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalizeRefuses(t *testing.T) {
	many := func(n int, f func(i int) corral.EgressRule) []corral.EgressRule {
		out := make([]corral.EgressRule, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	ports := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 1000 + i
		}
		return out
	}
	strs := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	one := func(r corral.EgressRule) corral.Egress {
		return corral.Egress{Allow: []corral.EgressRule{rule("ok.example.com"), rule("ok.example.org"), r}}
	}
	for _, tt := range []struct {
		name string
		in   corral.Egress
		want string // in the message
	}{
		{"too many rules", corral.Egress{Allow: many(MaxRules+1, func(i int) corral.EgressRule { return rule(fmt.Sprintf("h%d.example.com", i)) })}, "policy.egress.allow: 101 rules"},
		{"an empty host", one(rule("")), "policy.egress.allow[2].host"},
		{"a bare wildcard", one(rule("*")), "policy.egress.allow[2].host"},
		{"a wildcard over a top-level domain", one(rule("*.com")), "public suffix"},
		{"a wildcard over a two-label public suffix", one(rule("*.co.uk")), "public suffix"},
		{"a wildcard over one unknown label", one(rule("*.internal")), "public suffix"},
		{"a wildcard inside", one(rule("a.*.example.com")), "first label"},
		{"a wildcard without its dot", one(rule("*example.com")), "first label"},
		{"a URL, not a host", one(rule("https://example.com")), "letters, digits"},
		{"a host with a port", one(rule("example.com:443")), "letters, digits"},
		{"an underscore", one(rule("a_b.example.com")), "letters, digits"},
		{"an empty label", one(rule("a..example.com")), "1 to 63"},
		{"a long label", one(rule(strings.Repeat("a", 64) + ".com")), "1 to 63"},
		{"a long name", one(rule(strings.Repeat("a.", 127) + "com")), "253"},
		{"a label starting with a hyphen", one(rule("-a.example.com")), "hyphen"},
		{"an all-digit last label", one(rule("127.1")), "all digits"},
		{"a zone", one(rule("fe80::1%eth0")), "zone"},
		{"brackets around IPv4", one(rule("[10.0.0.1]")), "IPv6"},
		{"port zero", one(corral.EgressRule{Host: "example.com", Ports: []int{0}}), "policy.egress.allow[2].ports: 0 is not a port"},
		{"port too high", one(corral.EgressRule{Host: "example.com", Ports: []int{65536}}), "65536 is not a port"},
		{"too many ports", one(corral.EgressRule{Host: "example.com", Ports: ports(17)}), "17 ports"},
		{"a lower-case method", one(corral.EgressRule{Host: "example.com", Methods: []string{"get"}}), "policy.egress.allow[2].methods"},
		{"a method with a space", one(corral.EgressRule{Host: "example.com", Methods: []string{"GET POST"}}), "methods"},
		{"an empty method", one(corral.EgressRule{Host: "example.com", Methods: []string{""}}), "methods"},
		{"too many methods", one(corral.EgressRule{Host: "example.com", Methods: strs(17, func(i int) string { return fmt.Sprintf("M%d", i) })}), "17 methods"},
		{"a relative path", one(corral.EgressRule{Host: "example.com", Paths: []string{"v1/"}}), "policy.egress.allow[2].paths: \"v1/\" does not start with /"},
		{"a path with a NUL", one(corral.EgressRule{Host: "example.com", Paths: []string{"/a\x00"}}), "control"},
		{"a path with a space", one(corral.EgressRule{Host: "example.com", Paths: []string{"/a b"}}), "space"},
		{"a path with a query", one(corral.EgressRule{Host: "example.com", Paths: []string{"/a?b"}}), "query"},
		{"a path percent-encoded", one(corral.EgressRule{Host: "example.com", Paths: []string{"/a%2fb"}}), "decoded"},
		{"a path with dot segments", one(corral.EgressRule{Host: "example.com", Paths: []string{"/a/../b"}}), "clean"},
		{"a path with a double slash", one(corral.EgressRule{Host: "example.com", Paths: []string{"/a//b"}}), "clean"},
		{"too many paths", one(corral.EgressRule{Host: "example.com", Paths: strs(33, func(i int) string { return fmt.Sprintf("/p%d", i) })}), "33 paths"},
		{"an unknown preset", corral.Egress{Presets: []string{"npm", "maven"}}, "policy.egress.presets[1]: \"maven\" is not a preset"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Normalize(tt.in)
			if corral.ErrorCode(err) != corral.EINVALID {
				t.Fatalf("Normalize = %v, want %s", err, corral.EINVALID)
			}
			if msg := corral.ErrorMessage(err); !strings.Contains(msg, tt.want) {
				t.Fatalf("Normalize: message %q, want it to say %q", msg, tt.want)
			}
			if Check(tt.in) == nil {
				t.Fatalf("Check accepts what Normalize refuses")
			}
		})
	}
}

func TestPresets(t *testing.T) {
	names := PresetNames()
	if !sort.StringsAreSorted(names) || len(names) != len(Presets) {
		t.Fatalf("PresetNames() = %v", names)
	}
	for _, name := range names {
		if _, err := Normalize(corral.Egress{Allow: Presets[name]}); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
	// Expand hands out copies: a caller changing them changes no preset.
	rules := Expand(corral.Egress{Presets: []string{"npm"}, Allow: []corral.EgressRule{rule("example.com")}})
	if len(rules) != 2 || rules[0].Host != "registry.npmjs.org" || rules[1].Host != "example.com" {
		t.Fatalf("Expand = %+v", rules)
	}
	rules[0].Ports[0] = 1
	if Presets["npm"][0].Ports[0] != 443 {
		t.Fatalf("changing an expanded rule changed the preset")
	}
}

func TestMatch(t *testing.T) {
	rules := []corral.EgressRule{
		{Host: "api.example.com", Ports: []int{443}},
		{Host: "*.cdn.example.com"},
		{Host: "10.0.0.5", Ports: []int{8080}},
		{Host: "2001:db8::1"},
		{Host: "api.example.com", Ports: []int{8443}, Methods: []string{"GET"}},
	}
	for _, tt := range []struct {
		name string
		host string
		port int
		want int // index of the rule, -1 for none
	}{
		{"the host and port", "api.example.com", 443, 0},
		{"upper case and a trailing dot", "API.Example.COM.", 443, 0},
		{"another port of the host", "api.example.com", 80, -1},
		{"the second rule of the same host", "api.example.com", 8443, 4},
		{"another host", "example.com", 443, -1},
		{"a host that ends like it", "evilapi.example.com", 443, -1},
		{"under a wildcard, default port 443", "a.cdn.example.com", 443, 1},
		{"under a wildcard, default port 80", "a.b.cdn.example.com", 80, 1},
		{"under a wildcard, another port", "a.cdn.example.com", 8080, -1},
		{"the wildcard's own suffix", "cdn.example.com", 443, -1},
		{"a suffix that only ends the same", "xcdn.example.com", 443, -1},
		{"an IP address", "10.0.0.5", 8080, 2},
		{"an IPv6 address in brackets", "[2001:DB8:0::1]", 443, 3},
		{"an IPv4-mapped address", "::ffff:10.0.0.5", 8080, 2},
		{"another IP address", "10.0.0.6", 8080, -1},
		{"empty", "", 443, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Match(rules, tt.host, tt.port)
			if tt.want < 0 {
				if ok {
					t.Fatalf("Match(%q, %d) = %+v, want none", tt.host, tt.port, got)
				}
				return
			}
			if !ok || !reflect.DeepEqual(got, rules[tt.want]) {
				t.Fatalf("Match(%q, %d) = %+v, %v; want rule %d", tt.host, tt.port, got, ok, tt.want)
			}
		})
	}
}

func TestPermits(t *testing.T) {
	any := corral.EgressRule{Host: "h"}
	get := corral.EgressRule{Host: "h", Methods: []string{"GET", "HEAD"}}
	a := corral.EgressRule{Host: "h", Paths: []string{"/a"}}
	dir := corral.EgressRule{Host: "h", Paths: []string{"/a/"}}
	root := corral.EgressRule{Host: "h", Paths: []string{"/"}}
	for _, tt := range []struct {
		name   string
		rule   corral.EgressRule
		method string
		target string
		want   bool
	}{
		{"any method and path", any, "DELETE", "/x/../../y", true},
		{"a listed method", get, "HEAD", "/x", true},
		{"an unlisted method", get, "POST", "/x", false},
		{"a method in lower case is another method", get, "get", "/x", false},
		{"the prefix itself", a, "GET", "/a", true},
		{"below the prefix", a, "GET", "/a/b", true},
		{"the prefix with a query", a, "GET", "/a?x=1", true},
		{"a name that starts like the prefix", a, "GET", "/ab", false},
		{"another path", a, "GET", "/b", false},
		{"out of the prefix by ..", a, "GET", "/a/../b", false},
		{"into the prefix by ..", a, "GET", "/b/../a/x", false},
		{"dot segments that stay inside", a, "GET", "/a/./x/../y", true},
		{"an encoded dot-dot", a, "GET", "/a/%2e%2e/b", false},
		{"an encoded slash", a, "GET", "/a%2F..%2Fb", false},
		{"a backslash", a, "GET", "/a\\..\\b", false},
		{"an encoded letter", a, "GET", "/%61/x", true},
		{"an encoded NUL", a, "GET", "/a/%00", false},
		{"a bad escape", a, "GET", "/a/%zz", false},
		{"an asterisk target", a, "OPTIONS", "*", false},
		{"an authority target", a, "CONNECT", "h:443", false},
		{"a directory prefix and its entries", dir, "GET", "/a/b", true},
		{"a directory prefix and the bare name", dir, "GET", "/a", false},
		{"a directory prefix and its cleaned form", dir, "GET", "/a/b/../", true},
		{"the root prefix", root, "GET", "/anything", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Permits(tt.rule, tt.method, tt.target); got != tt.want {
				t.Fatalf("Permits(%+v, %q, %q) = %v, want %v (%s)", tt.rule, tt.method, tt.target, got, tt.want, Refusal(tt.rule, tt.method, tt.target))
			}
			if why := Refusal(tt.rule, tt.method, tt.target); (why == "") != tt.want {
				t.Fatalf("Refusal = %q, want it empty only when permitted", why)
			}
		})
	}
	if why := Refusal(get, "POST", "/"); !strings.Contains(why, "POST") || !strings.Contains(why, "GET, HEAD") {
		t.Fatalf("Refusal names neither the method nor the rule's: %q", why)
	}
	if why := Refusal(a, "GET", "/b"); !strings.Contains(why, `"/b"`) || !strings.Contains(why, "/a") {
		t.Fatalf("Refusal names neither the path nor the rule's: %q", why)
	}
}

func TestCovers(t *testing.T) {
	allow := func(rules ...corral.EgressRule) corral.Egress { return corral.Egress{Allow: rules} }
	r := func(host string, ports []int, methods, paths []string) corral.EgressRule {
		return corral.EgressRule{Host: host, Ports: ports, Methods: methods, Paths: paths}
	}
	for _, tt := range []struct {
		name          string
		parent, child corral.Egress
		want          bool
	}{
		{"nothing within anything", allow(), allow(), true},
		{"something within nothing", allow(), allow(rule("a.com")), false},
		{"the same host", allow(rule("a.com")), allow(rule("A.com.")), true},
		{"another host", allow(rule("a.com")), allow(rule("b.com")), false},
		{"a host under a wildcard", allow(rule("*.a.com")), allow(rule("x.a.com")), true},
		{"a narrower wildcard", allow(rule("*.a.com")), allow(rule("*.x.a.com")), true},
		{"the same wildcard", allow(rule("*.a.com")), allow(rule("*.a.com")), true},
		{"a wildcard's suffix itself", allow(rule("*.a.com")), allow(rule("a.com")), false},
		{"a wider wildcard", allow(rule("*.x.a.com")), allow(rule("*.a.com")), false},
		{"a wildcard under a name", allow(rule("a.com")), allow(rule("*.a.com")), false},
		{"a port of the defaults", allow(rule("a.com")), allow(r("a.com", []int{443}, nil, nil)), true},
		{"another port", allow(rule("a.com")), allow(r("a.com", []int{8443}, nil, nil)), false},
		{"the defaults under one port", allow(r("a.com", []int{443}, nil, nil)), allow(rule("a.com")), false},
		{"the defaults over two rules", allow(r("a.com", []int{443}, nil, nil), r("a.com", []int{80}, nil, nil)), allow(rule("a.com")), true},
		{"any method under any", allow(rule("a.com")), allow(r("a.com", nil, []string{"GET"}, nil)), true},
		{"a listed method", allow(r("a.com", nil, []string{"GET", "HEAD"}, nil)), allow(r("a.com", nil, []string{"HEAD"}, nil)), true},
		{"an unlisted method", allow(r("a.com", nil, []string{"GET"}, nil)), allow(r("a.com", nil, []string{"GET", "POST"}, nil)), false},
		{"any method under some", allow(r("a.com", nil, []string{"GET"}, nil)), allow(rule("a.com")), false},
		{"a path under a prefix", allow(r("a.com", nil, nil, []string{"/v1"})), allow(r("a.com", nil, nil, []string{"/v1/x", "/v1"})), true},
		{"a directory under a prefix", allow(r("a.com", nil, nil, []string{"/v1"})), allow(r("a.com", nil, nil, []string{"/v1/"})), true},
		{"a prefix under its directory", allow(r("a.com", nil, nil, []string{"/v1/"})), allow(r("a.com", nil, nil, []string{"/v1"})), false},
		{"a name that starts like the prefix", allow(r("a.com", nil, nil, []string{"/v1"})), allow(r("a.com", nil, nil, []string{"/v10"})), false},
		{"any path under some", allow(r("a.com", nil, nil, []string{"/v1"})), allow(rule("a.com")), false},
		{"a preset within its hosts", allow(https("registry.npmjs.org")...), corral.Egress{Presets: []string{"npm"}}, true},
		{"a preset within another", corral.Egress{Presets: []string{"npm"}}, corral.Egress{Presets: []string{"pypi"}}, false},
		{"the parent's preset counts", corral.Egress{Presets: []string{"github"}}, allow(r("api.github.com", []int{443}, []string{"GET"}, nil)), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Covers(tt.parent, tt.child); got != tt.want {
				t.Fatalf("Covers(%+v, %+v) = %v, want %v", tt.parent, tt.child, got, tt.want)
			}
		})
	}
}

func TestMatchHostIP(t *testing.T) {
	// A wildcard never matches an address, whatever its digits end with.
	if MatchHost("*.0.5", "10.0.0.5") {
		t.Fatal("a wildcard matched an IP address")
	}
	if !slices.Equal(portsOf(rule("x")), []int{80, 443}) {
		t.Fatal("a rule without ports is not 80 and 443")
	}
}
