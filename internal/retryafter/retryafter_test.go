package retryafter

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7", 7 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"0", 0, true},
		{"3600", time.Hour, true},
		{"3601", Max, true},
		// past ~9.2e9 s a naive parser wraps to a negative delay
		{"9223372037", Max, true},
		{"9223372036854775807", Max, true},
		{"99999999999999999999", Max, true}, // past uint64 too
		{date(3 * time.Second), 3 * time.Second, true},
		{date(90 * time.Second), 90 * time.Second, true},
		{date(-time.Hour), 0, true}, // in the past: no wait
		{date(48 * time.Hour), Max, true},
		{"Fri, 31 Dec 9999 23:59:59 GMT", Max, true},
		{"soon", 0, false},
		{"", 0, false},
		{"-3", 0, false},
		{"-99999999999999999999", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"1e9", 0, false},
	} {
		d, ok := Parse(tc.in, now)
		assert.Equal(t, tc.ok, ok, "Parse(%q)", tc.in)
		assert.Equal(t, tc.want, d, "Parse(%q)", tc.in)
	}
}

// Any header gives a wait within [0, Max] or is ignored; every delay-seconds value
// (digits only, however long) is used, capped, never wrapped.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "0", "-3", "120", "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
		"soon", " 5 ", "99999999999999999999", "9223372037", "9223372036854775807", "+5", "3601"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := Parse(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("Parse(%q) ignored but returned %s", v, d)
			}
			if digitsOnly(strings.TrimSpace(v)) {
				t.Fatalf("Parse(%q): delay-seconds ignored", v)
			}
			return
		}
		if d < 0 || d > Max {
			t.Fatalf("Parse(%q) = %s, outside [0, %s]", v, d, Max)
		}
	})
}
