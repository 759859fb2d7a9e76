package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentmeter/agentmeter/runtime/store"
	"github.com/agentmeter/agentmeter/runtime/store/postgres"
	"github.com/agentmeter/agentmeter/runtime/store/sqlite"
	"github.com/agentmeter/agentmeter/runtime/store/storetest"
)

// TestTokenUsageSameBytesOnSQLiteAndPostgres serves the same seeded rows from both
// backends and compares the HTTP bodies byte for byte.
func TestTokenUsageSameBytesOnSQLiteAndPostgres(t *testing.T) {
	ctx := context.Background()
	pg, err := postgres.Open(ctx, postgresServer(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	lite, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	var envs []*env
	for _, st := range []store.RunStore{pg, lite} {
		storetest.SeedPinnedExample(t, st, "thread-1")
		storetest.SeedByModel(t, st, "mixed")
		srv, err := New(Options{Config: Config{APIKeys: testKeys()}, Store: st, Agents: newLeadFactory(t),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(func() {
			c, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = srv.Shutdown(c)
			hs.Close()
			_ = st.Close()
		})
		envs = append(envs, &env{srv: srv, http: hs, store: &storeHandle{st}})
	}
	for _, path := range []string{
		"/api/threads/thread-1/token-usage", "/api/threads/thread-1/token-usage?include_active=true",
		"/api/threads/mixed/token-usage", "/api/threads/thread-1-other/token-usage", "/api/threads/none/token-usage",
	} {
		_, onPG := envs[0].do(t, "GET", path, "alice-key", "")
		_, onLite := envs[1].do(t, "GET", path, "alice-key", "")
		if onPG != onLite {
			t.Errorf("%s:\npostgres %s\nsqlite   %s", path, onPG, onLite)
		}
	}
	want := `{"thread_id":"thread-1","total_tokens":150,"total_input_tokens":90,"total_output_tokens":60,"total_runs":2,"by_model":{"unknown":{"tokens":150,"runs":2}},"by_caller":{"lead_agent":120,"subagent":25,"middleware":5},"context_usage":null}`
	envs[0].expect(t, "GET", "/api/threads/thread-1/token-usage", "alice-key", "", 200, want)
	// A real run on PostgreSQL, end to end through the API.
	run := decodeRun(t, envs[0].expect(t, "POST", "/api/threads/pg-thread/runs?wait=true", "bob-key", `{"input":"please delegate"}`, 200, ""))
	if run.Status != store.StatusSuccess || run.Usage.TotalTokens != 627 {
		t.Fatalf("run on postgres = %+v", run)
	}
	envs[0].expect(t, "GET", "/api/threads/pg-thread/token-usage", "alice-key", "", 404, detail("Thread pg-thread not found"))
}
