package middleware

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaks a goroutine (the sandbox cancellation
// watcher, the limiter waiters, the agent loop's tool goroutines).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
