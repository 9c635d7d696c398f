package egress

import (
	"context"
	"net/netip"
	"testing"

	"corral"
)

func TestAllowed(t *testing.T) {
	zero := Policy{}
	office := Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}}
	for _, tt := range []struct {
		addr          string
		zero, allowed bool
	}{
		{"140.82.112.3", true, true},
		{"2606:4700::1111", true, true},
		{"127.0.0.1", false, false},
		{"::1", false, false},
		{"::ffff:127.0.0.1", false, false},
		{"10.0.0.1", false, false},
		{"10.20.3.4", false, true},
		{"::ffff:10.20.3.4", false, true},
		{"172.16.0.1", false, false},
		{"192.168.1.1", false, false},
		{"169.254.169.254", false, false}, // the cloud metadata service
		{"100.64.0.1", false, false},
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"fd00::1", false, false},
		{"fe80::1", false, false},
		{"224.0.0.1", false, false},
		{"255.255.255.255", false, false},
	} {
		a := netip.MustParseAddr(tt.addr)
		if got := zero.Allowed(a); got != tt.zero {
			t.Errorf("zero policy: Allowed(%s) = %v, want %v", a, got, tt.zero)
		}
		if got := office.Allowed(a); got != tt.allowed {
			t.Errorf("10.20.0.0/16 allowed: Allowed(%s) = %v, want %v", a, got, tt.allowed)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes(" 10.20.0.0/16, 127.0.0.1 ,fd00::/8,,")
	want := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("fd00::/8")}
	if err != nil || len(got) != len(want) {
		t.Fatalf("ParsePrefixes = %v, %v; want %v", got, err, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ParsePrefixes = %v, want %v", got, want)
		}
	}
	if _, err := ParsePrefixes("10.0.0.0/33"); corral.ErrorCode(err) != corral.EINVALID {
		t.Fatalf("a bad range: %v", err)
	}
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	if _, err := (Policy{}).Resolve(ctx, "127.0.0.1"); corral.ErrorCode(err) != corral.EFORBIDDEN {
		t.Fatalf("loopback: %v", err)
	}
	if _, err := (Policy{}).Resolve(ctx, "localhost"); corral.ErrorCode(err) != corral.EFORBIDDEN {
		t.Fatalf("a name of loopback: %v", err)
	}
	lo := Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if a, err := lo.Resolve(ctx, "localhost"); err != nil || a != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("localhost, loopback allowed = %v, %v", a, err)
	}
	if a, err := (Policy{}).Resolve(ctx, "[2606:4700::1111]"); err != nil || a.String() != "2606:4700::1111" {
		t.Fatalf("a bracketed public IPv6 = %v, %v", a, err)
	}
	if _, err := (Policy{}).Resolve(ctx, "no-such-host.invalid"); corral.ErrorCode(err) != corral.EUNAVAIL {
		t.Fatalf("a name that does not resolve: %v", err)
	}
}
