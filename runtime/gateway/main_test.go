package gateway

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/store/storetest"
)

var (
	pgOnce   sync.Once
	pgServer *storetest.PostgresServer
	pgErr    error
)

// postgresServer starts (once) the PostgreSQL the Postgres-backed tests use.
func postgresServer(t *testing.T) *storetest.PostgresServer {
	pgOnce.Do(func() { pgServer, pgErr = storetest.StartPostgres() })
	return storetest.RequirePostgres(t, pgServer, pgErr)
}

// Every run goroutine, stream and timer ends by Shutdown.
func TestMain(m *testing.M) {
	code := m.Run()
	if pgServer != nil {
		pgServer.Stop()
	}
	if code == 0 {
		if err := goleak.Find(
			// net/http's keep-alive connections of the default client outlive a test server.
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			// pgx's database/sql pool closes connections asynchronously.
			goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func journalUsage(total int64) journal.CompletionData {
	return journal.CompletionData{TotalTokens: total, TotalInputTokens: total, LeadAgentTokens: total}
}
