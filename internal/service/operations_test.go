package service

import (
	"strings"
	"testing"
	"time"

	"corral"
)

func TestUsageQuery(t *testing.T) {
	noon := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	midnight := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   UsageInput
		want corral.UsageQuery
		err  string // a part of the message; "" for none
	}{
		{"nothing: by agent, unbounded", UsageInput{}, corral.UsageQuery{GroupBy: corral.UsageByAgent}, ""},
		{"by model", UsageInput{GroupBy: "model"}, corral.UsageQuery{GroupBy: corral.UsageByModel}, ""},
		{"by user", UsageInput{GroupBy: "user"}, corral.UsageQuery{GroupBy: corral.UsageByUser}, ""},
		{"a date is its midnight UTC", UsageInput{Since: "2026-11-29"}, corral.UsageQuery{GroupBy: corral.UsageByAgent, Since: midnight}, ""},
		{"a time in another zone is the same instant", UsageInput{Until: "2026-11-29T13:00:00+01:00"},
			corral.UsageQuery{GroupBy: corral.UsageByAgent, Until: noon}, ""},
		{"both", UsageInput{GroupBy: "agent", Since: "2026-11-29", Until: "2026-11-29T12:00:00Z"},
			corral.UsageQuery{GroupBy: corral.UsageByAgent, Since: midnight, Until: noon}, ""},
		{"unknown group", UsageInput{GroupBy: "day"}, corral.UsageQuery{}, `group_by must be one of agent, user, model (got "day")`},
		{"group in capitals", UsageInput{GroupBy: "Agent"}, corral.UsageQuery{}, "group_by must be one of"},
		{"since not a time", UsageInput{Since: "yesterday"}, corral.UsageQuery{}, `since must be an RFC 3339 time (2026-11-29T12:00:00Z) or a date (2026-11-29), not "yesterday"`},
		{"until a unix time", UsageInput{Until: "1764417600"}, corral.UsageQuery{}, "until must be an RFC 3339 time"},
		{"since after until", UsageInput{Since: "2026-11-30", Until: "2026-11-29"}, corral.UsageQuery{}, "since (2026-11-30T00:00:00Z) must be before until (2026-11-29T00:00:00Z)"},
		{"an empty span", UsageInput{Since: "2026-11-29", Until: "2026-11-29"}, corral.UsageQuery{}, "must be before until"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := usageQuery(tt.in)
			if tt.err != "" {
				if corral.ErrorCode(err) != corral.EINVALID || !strings.Contains(corral.ErrorMessage(err), tt.err) {
					t.Fatalf("usageQuery(%+v) = %v, want invalid: %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("usageQuery(%+v) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestAuditCursor(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 0, true},
		{"0", 0, true},
		{"42", 42, true},
		{AuditCursor(9_007_199_254_740_993), 9_007_199_254_740_993, true},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1.5", 0, false},
		{"abc", 0, false},
		{"99999999999999999999", 0, false},
	} {
		got, err := auditCursor(tt.in)
		if tt.ok != (err == nil) || got != tt.want {
			t.Errorf("auditCursor(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && corral.ErrorCode(err) != corral.EINVALID {
			t.Errorf("auditCursor(%q): code %q, want invalid", tt.in, corral.ErrorCode(err))
		}
	}
}
