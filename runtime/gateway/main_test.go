package gateway

import (
	"testing"

	"go.uber.org/goleak"
)

// Every run goroutine, stream and timer ends by Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http's keep-alive connections of the default client outlive a test server.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}
