package gateway

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmeter/agentmeter/runtime/journal"
)

// Every run goroutine, stream and timer ends by Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http's keep-alive connections of the default client outlive a test server.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

func journalUsage(total int64) journal.CompletionData {
	return journal.CompletionData{TotalTokens: total, TotalInputTokens: total, LeadAgentTokens: total}
}
