//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

func langfuseExporterYAML(srv *langfusefake.Server, extra string) string {
	return fmt.Sprintf("    endpoint: %s\n    public_key: %s\n    secret_key: %s\n%s",
		srv.URL, srv.PublicKey, srv.SecretKey, extra)
}

// A DeerFlow-shaped run through the ocb-built collector reaches the fake Langfuse as
// correctly shaped observations, and Langfuse's trace total is the run's own usage.
func TestLangfuseEndToEnd(t *testing.T) {
	LangfuseEnv(t)
	srv := langfusefake.New(t)
	otlpAddr := FreeAddr(t)
	cfg := LangfuseCollectorConfig(otlpAddr, langfuseExporterYAML(srv, "    check_credentials: true\n"), "")
	Start(t, cfg, otlpAddr)

	run := langfusefake.DefaultAgentRun()
	td, tid, ids := langfusefake.AgentTrace(run)
	require.NoError(t, SendOTLPHTTP(context.Background(), otlpAddr, td))
	obs := srv.WaitForObservations(t, 9, 30*time.Second)

	assert.Empty(t, srv.Problems())
	assert.Equal(t, 1, srv.ProjectCalls(), "credentials checked once at start")
	for _, r := range srv.Requests() {
		assert.True(t, r.Gzip)
		assert.Equal(t, "4", r.Header.Get("x-langfuse-ingestion-version"))
	}
	assert.Equal(t, run.OwnTotal(), langfusefake.TraceUsage(obs)[tid.String()])
	byID := langfusefake.ByID(obs)
	for _, o := range obs {
		assert.Equal(t, "thread-abc", o.SessionID)
		assert.Equal(t, "user-42", o.UserID)
		assert.Equal(t, "lead-agent", o.TraceName)
	}
	d := byID[ids[langfusefake.RoleLeadChat1].String()]
	assert.Equal(t, "generation", d.Type)
	assert.Equal(t, map[string]int64{"input": 1000, "input_cached_tokens": 200, "output": 200, "output_reasoning_tokens": 100, "total": 1500}, d.Usage)
	assert.EqualValues(t, run.Usage[1].Add(run.Usage[2]).Total(), d.Metadata["subagent_total_tokens"])
}

// Enabled without keys: the collector refuses to start with DeerFlow's message.
func TestLangfuseFailFast(t *testing.T) {
	LangfuseEnv(t, "LANGFUSE_TRACING", "true", "LANGFUSE_SECRET_KEY", "sk-lf-only-secret")
	otlpAddr := FreeAddr(t)
	c := Start(t, LangfuseCollectorConfig(otlpAddr, "", ""), "")
	err := c.Wait(60 * time.Second)
	require.Error(t, err, "the collector must exit")
	logs := c.Logs()
	assert.Contains(t, logs, "Langfuse tracing is enabled but required settings are missing: LANGFUSE_PUBLIC_KEY")
	assert.NotContains(t, logs, "LANGFUSE_SECRET_KEY\n", "only the missing setting is named")
	assert.NotContains(t, logs, "sk-lf-only-secret")
}

// Rejected keys with check_credentials: the collector does not start.
func TestLangfuseBadCredentialsFailStart(t *testing.T) {
	LangfuseEnv(t)
	srv := langfusefake.New(t)
	otlpAddr := FreeAddr(t)
	yaml := fmt.Sprintf("    endpoint: %s\n    public_key: %s\n    secret_key: sk-lf-wrong-secret\n    check_credentials: true\n",
		srv.URL, srv.PublicKey)
	c := Start(t, LangfuseCollectorConfig(otlpAddr, yaml, ""), "")
	require.Error(t, c.Wait(60*time.Second))
	assert.Contains(t, c.Logs(), "langfuse credential check failed")
	assert.NotContains(t, c.Logs(), "sk-lf-wrong-secret")
}

// A bare `langfuse:` with no environment: starts, says it is disabled once, drops.
func TestLangfuseDisabledDrops(t *testing.T) {
	LangfuseEnv(t)
	srv := langfusefake.New(t)
	otlpAddr := FreeAddr(t)
	c := Start(t, LangfuseCollectorConfig(otlpAddr, "", ""), otlpAddr)
	td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
	require.NoError(t, SendOTLPHTTP(context.Background(), otlpAddr, td))
	time.Sleep(300 * time.Millisecond)
	assert.Empty(t, srv.Requests())
	assert.Equal(t, 1, strings.Count(c.Logs(), "Langfuse exporter is disabled"))
	assert.Contains(t, c.Logs(), "LANGFUSE_TRACING is not set")
}

// Spans queued on disk while Langfuse fails survive a collector restart, graceful or a
// crash: every span arrives after the restart, none is lost.
func TestLangfusePersistentQueueAcrossRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*Collector)
	}{{"sigterm", (*Collector).Stop}, {"sigkill", (*Collector).Kill}} {
		t.Run(tc.name, func(t *testing.T) { persistentQueueRestart(t, tc.stop) })
	}
}

func persistentQueueRestart(t *testing.T, stop func(*Collector)) {
	LangfuseEnv(t)
	srv := langfusefake.New(t)
	srv.FailWith(&langfusefake.Response{Status: 503, Body: `{"message":"unavailable"}`})
	dir := t.TempDir()
	otlpAddr := FreeAddr(t)
	storage := filepath.Join(dir, "queue")
	require.NoError(t, os.MkdirAll(storage, 0o700))
	exporterYAML := langfuseExporterYAML(srv, `    sending_queue:
      storage: file_storage
      num_consumers: 2
    retry_on_failure:
      initial_interval: 50ms
      max_interval: 200ms
      max_elapsed_time: 0s
`)
	cfg := LangfuseCollectorConfig(otlpAddr, exporterYAML,
		fmt.Sprintf("  file_storage:\n    directory: %q\n", storage), "file_storage")

	first := StartIn(t, dir, cfg, otlpAddr)
	want := map[string]bool{}
	for i := 0; i < 5; i++ {
		td, _, _ := langfusefake.AgentTrace(langfusefake.DefaultAgentRun())
		for _, sp := range Spans([]ptrace.Traces{td}) {
			want[sp.SpanID().String()] = true
		}
		require.NoError(t, SendOTLPHTTP(context.Background(), otlpAddr, td))
	}
	// the exporter is trying and failing: data sits in the persistent queue
	deadline := time.Now().Add(20 * time.Second)
	for len(srv.Requests()) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.GreaterOrEqual(t, len(srv.Requests()), 3)
	require.Empty(t, srv.Observations())
	stop(first)

	srv.FailWith(nil)
	StartIn(t, dir, cfg, otlpAddr)
	obs := srv.WaitForObservations(t, len(want), 60*time.Second)
	got := map[string]int{}
	for _, o := range obs {
		got[o.ID]++
	}
	for id := range want {
		assert.GreaterOrEqual(t, got[id], 1, "span %s lost", id)
	}
	assert.Len(t, got, len(want), "no foreign spans")
	assert.Empty(t, srv.Problems())
	t.Logf("%d spans queued across the restart, %d observations received (Langfuse upserts by id)", len(want), len(obs))
}
