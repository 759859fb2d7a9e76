package middleware

import (
	"sync"
	"time"
)

// Circuit states.
const (
	CircuitClosed   = "closed"
	CircuitOpen     = "open"
	CircuitHalfOpen = "half_open"
)

// CircuitBreaker opens after FailureThreshold consecutive retriable failures, fails fast
// while open, and after the recovery timeout lets exactly one probe through (half-open):
// a successful probe closes it, a failed one reopens it at once (DeerFlow's LLMErrorHandlingMiddleware).
// Safe for concurrent use; the clock is injectable.
type CircuitBreaker struct {
	threshold int
	recovery  time.Duration
	now       func() time.Time

	mu        sync.Mutex
	state     string
	failures  int
	openUntil time.Time
	probing   bool
}

// NewCircuitBreaker returns a closed breaker.
func NewCircuitBreaker(threshold int, recovery time.Duration, now func() time.Time) *CircuitBreaker {
	if threshold < 1 {
		threshold = 1
	}
	if now == nil {
		now = time.Now
	}
	return &CircuitBreaker{threshold: threshold, recovery: recovery, now: now, state: CircuitClosed}
}

// Allow reports whether a call may proceed, and whether it is the half-open probe.
func (b *CircuitBreaker) Allow() (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case CircuitClosed:
		return true, false
	case CircuitOpen:
		if b.now().Before(b.openUntil) {
			return false, false
		}
		b.state = CircuitHalfOpen
		fallthrough
	default: // half-open: one probe at a time
		if b.probing {
			return false, false
		}
		b.probing = true
		return true, true
	}
}

// Success closes the circuit and resets the failure count.
func (b *CircuitBreaker) Success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.failures, b.probing = CircuitClosed, 0, false
}

// Failure records a retriable failure: a failed probe reopens at once; otherwise the
// circuit opens when the consecutive count reaches the threshold.
func (b *CircuitBreaker) Failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == CircuitHalfOpen {
		b.state, b.probing = CircuitOpen, false
		b.openUntil = b.now().Add(b.recovery)
		return
	}
	b.failures++
	if b.failures >= b.threshold {
		b.state = CircuitOpen
		b.openUntil = b.now().Add(b.recovery)
	}
}

// ReleaseProbe frees the half-open probe without a verdict (non-retriable errors,
// cancellation); the state stays half-open.
func (b *CircuitBreaker) ReleaseProbe() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// State returns the current state (an expired open circuit reports open until the next
// Allow turns it half-open).
func (b *CircuitBreaker) State() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Failures returns the consecutive failure count.
func (b *CircuitBreaker) Failures() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures
}
