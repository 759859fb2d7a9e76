// Package retryafter parses the Retry-After header for both vendor exporters, so they
// honour rate limits identically.
package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Max caps the wait a Retry-After header can ask for. A server that asks for more than an
// hour is misconfigured (or the header was mangled on the way); honouring it would park a
// queue consumer for that long, and an unbounded value would overflow time.Duration
// into a negative delay. One hour is far above any rate-limit window either vendor
// documents; below it the hint is obeyed as sent. exporterhelper still drops a batch whose
// next attempt would fall after retry_on_failure.max_elapsed_time (docs/reliability.md),
// so with a finite max_elapsed_time the effective bound is lower.
const Max = time.Hour

// Parse reads a Retry-After value (RFC 9110 §10.2.3): delay-seconds (digits only) or an
// HTTP date. The delay is within [0, Max]: larger values, including digit strings past
// int64, are capped; a date in the past means no wait. Anything else (a sign, a fraction,
// garbage) is ignored: ok is false.
func Parse(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if digitsOnly(v) {
		// compare before multiplying: seconds past ~9.2e9 wrap time.Duration negative
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil || s > uint64(Max/time.Second) {
			return Max, true // only a range error is possible for digits
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		// Time.Sub saturates instead of overflowing
		return min(max(t.Sub(now), 0), Max), true
	}
	return 0, false
}

func digitsOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
