package main

import (
	"io"
	"strings"
	"testing"

	"corral/internal/service"
)

// TestServePendingDiskFlags: the bounds on what pending change sets hold
// per person and in all, from flags and the environment to the service's
// configuration, refused when they are not positive.
func TestServePendingDiskFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want service.PendingDiskBounds
		err  string // a substring of the error; "" for none
	}{
		{name: "defaults", want: service.PendingDiskBounds{PerUser: 16 << 30, Total: 64 << 30}},
		{name: "flags", args: []string{"--pending-disk-per-user", "1000", "--pending-disk-total", "5000"},
			want: service.PendingDiskBounds{PerUser: 1000, Total: 5000}},
		{name: "environment", env: map[string]string{"CORRAL_PENDING_DISK_PER_USER": "2000", "CORRAL_PENDING_DISK_TOTAL": "9000"},
			want: service.PendingDiskBounds{PerUser: 2000, Total: 9000}},
		{name: "flag over environment", args: []string{"--pending-disk-total", "7"}, env: map[string]string{"CORRAL_PENDING_DISK_TOTAL": "9000"},
			want: service.PendingDiskBounds{PerUser: 16 << 30, Total: 7}},
		{name: "not a number", env: map[string]string{"CORRAL_PENDING_DISK_PER_USER": "lots"}, err: "CORRAL_PENDING_DISK_PER_USER"},
		{name: "zero", args: []string{"--pending-disk-per-user", "0"}, err: "--pending-disk-per-user must be positive"},
		{name: "negative", env: map[string]string{"CORRAL_PENDING_DISK_TOTAL": "-1"}, err: "CORRAL_PENDING_DISK_TOTAL"},
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
			if got := c.PendingDisk; got != tt.want {
				t.Fatalf("parseServe(%q) gives the service %+v, want %+v", tt.args, got, tt.want)
			}
		})
	}
}
