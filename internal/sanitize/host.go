package sanitize

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"corral"
)

// maxHost bounds a host as typed: a DNS name is at most 253 bytes, and
// room is left for a port and brackets.
const maxHost = 300

// Host checks and normalises a host: a DNS name (internationalised names
// become their ASCII form) or an IP address, with an optional port, and
// nothing else: no scheme, user, path, query or whitespace. Names are
// lower-cased and ":443", https' default, is dropped, so "GitHub.com:443"
// and "github.com" are one host; an IPv6 address with a port is written
// "[::1]:8443". A name whose last label is all digits ("1.2.3") is refused:
// resolvers read some of those as an IP address. Code EINVALID.
func Host(s string) (string, error) {
	bad := func(why string) error {
		return corral.Errorf(corral.EINVALID, "host %s: give a host name or IP address with an optional port, like github.com or 10.0.0.5:8443", why)
	}
	switch {
	case s == "":
		return "", bad("is empty")
	case len(s) > maxHost:
		return "", bad("is too long")
	case !utf8.ValidString(s):
		// IDNA would read a stray byte as U+FFFD, and make a name of it
		// that it refuses when given back.
		return "", bad("is not valid UTF-8")
	case strings.Contains(s, "://"):
		return "", bad("must not have a scheme (drop https://)")
	case strings.ContainsAny(s, "/?#@\\"):
		return "", bad("must not have a path, query, fragment or user name")
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "", bad("must not contain spaces or control characters")
		}
	}
	name, port := s, ""
	if ip, ok := parseIP(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); ok {
		return joinHostPort(ip, ""), nil // a bare IPv6 address has colons of its own
	}
	if strings.Contains(s, ":") {
		h, p, err := net.SplitHostPort(s)
		if err != nil {
			return "", bad("has a malformed port")
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || p != strconv.Itoa(n) {
			return "", bad("has a port that is not a number from 1 to 65535")
		}
		name, port = h, p
	}
	if ip, ok := parseIP(name); ok {
		return joinHostPort(ip, port), nil
	}
	if strings.Contains(name, ":") {
		return "", bad("is not a valid address")
	}
	ascii, err := idna.Lookup.ToASCII(strings.TrimSuffix(name, "."))
	if err != nil || !dnsName(ascii) {
		return "", bad("is not a valid DNS name")
	}
	return joinHostPort(strings.ToLower(ascii), port), nil
}

func parseIP(s string) (string, bool) {
	ip := net.ParseIP(s)
	if ip == nil {
		return "", false
	}
	return ip.String(), true
}

func joinHostPort(host, port string) string {
	if port == "" || port == "443" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// dnsName reports whether s is a DNS name in ASCII: labels of 1 to 63
// letters, digits and inner hyphens, 253 bytes in all, the last not all
// digits.
func dnsName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(alnum(c) || c == '-') {
				return false
			}
		}
	}
	last := labels[len(labels)-1]
	return strings.Trim(last, "0123456789") != ""
}

// maxURL bounds a URL.
const maxURL = 2048

// RepositoryURL checks the URL of a git repository to clone or push to:
// https only, no userinfo (a credential belongs in the credential store,
// not in a URL that is stored and shown), a host that Host accepts written
// in ASCII (git is handed it as it is), a port from 1 to 65535, no query
// or fragment, no control character or backslash in the path. Code
// EINVALID, saying which rule.
func RepositoryURL(raw string) (*url.URL, error) {
	if len(raw) > maxURL {
		return nil, corral.Errorf(corral.EINVALID, "the repository URL is longer than %d bytes", maxURL)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" {
		return nil, corral.Errorf(corral.EINVALID, "the repository URL cannot be parsed: give https://host/path")
	}
	switch {
	case u.Scheme != "https":
		return nil, corral.Errorf(corral.EINVALID, "the repository URL must start with https:// (other transports are refused)")
	case u.User != nil:
		return nil, corral.Errorf(corral.EINVALID, "the repository URL must not carry a user name or password: add a credential instead")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, corral.Errorf(corral.EINVALID, "the repository URL must not have a query or a fragment")
	case !hostName(u.Hostname()):
		return nil, corral.Errorf(corral.EINVALID, "the repository URL's host must be a DNS name or an IP address")
	case u.Port() != "":
		if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
			return nil, corral.Errorf(corral.EINVALID, "the repository URL's port is not a number from 1 to 65535")
		}
	}
	if strings.ContainsAny(u.Path, "\x00\r\n\\") {
		return nil, corral.Errorf(corral.EINVALID, "the repository URL's path has a control character or a backslash")
	}
	return u, nil
}

// hostName reports whether h, a URL's host without its port, is an IP
// address or an ASCII name that Host accepts.
func hostName(h string) bool {
	if _, ok := parseIP(h); ok {
		return true
	}
	if !isASCII(h) || strings.Contains(h, ":") {
		return false
	}
	_, err := Host(h)
	return err == nil
}

// ServerURL checks the URL of a server Corral itself calls (control, for a
// sandbox node; the model provider): an absolute http or https URL with a
// host. The caller says in its own error what the URL is for. Code
// EINVALID.
func ServerURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, corral.Errorf(corral.EINVALID, "not an absolute http or https URL")
	}
	return u, nil
}
