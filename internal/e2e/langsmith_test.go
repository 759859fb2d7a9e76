//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

const langSmithTestKey = "lsv2_pt_e2e_secret_key"

func waitForRuns(t *testing.T, fake *fakevendor.LangSmith, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for fake.RunCount() < n {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %d runs, have %d; requests: %+v", timeout, n, fake.RunCount(), fake.Requests())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DeerFlow's environment configures the exporter; subagentmerge merges the subagent's
// usage; the fake checks every run and the tree.
func TestLangSmithAgentTraceThroughCollector(t *testing.T) {
	fake := fakevendor.NewLangSmith(langSmithTestKey)
	defer fake.Close()
	clearLangSmithEnv(t)
	t.Setenv("LANGSMITH_TRACING", "true")
	t.Setenv("LANGSMITH_API_KEY", langSmithTestKey)
	t.Setenv("LANGCHAIN_PROJECT", "e2e-project")
	t.Setenv("LANGSMITH_ENDPOINT", fake.URL)

	otlpAddr := FreeAddr(t)
	c := Start(t, LangSmithCollectorConfig(otlpAddr, "      check_credentials: true", ""), otlpAddr)

	td, _ := fakevendor.AgentTrace(1, time.Now().Add(-time.Minute))
	StripMergedUsage(td)
	require.NoError(t, SendOTLPHTTP(context.Background(), otlpAddr, td))
	waitForRuns(t, fake, 8, 30*time.Second)
	assert.Empty(t, fake.Violations())

	byName := map[string]map[string]any{}
	for _, r := range fake.Runs() {
		byName[r["name"].(string)] = r
		assert.Equal(t, "e2e-project", r["session_name"])
	}
	chat := byName["chat gpt-4o"]
	md := chat["extra"].(map[string]any)["metadata"].(map[string]any)
	assert.Equal(t, map[string]any{"input_tokens": 500.0, "output_tokens": 80.0, "total_tokens": 580.0,
		"input_token_details": map[string]any{"cache_read": 100.0}},
		md["subagent_usage"].(map[string]any)["usage"], "merged by the collector's subagentmerge")
	assert.Equal(t, 1200.0, chat["outputs"].(map[string]any)["usage_metadata"].(map[string]any)["input_tokens"])
	assert.Equal(t, byName["invoke_agent lead_agent"]["id"], byName["invoke_agent lead_agent"]["trace_id"])
	assert.NotContains(t, c.Logs(), langSmithTestKey)
}

// An api_key written in the collector config is an intent to export: with no
// enabled: and no LANGSMITH_TRACING (or its fallbacks) in the environment, the exporter
// is on and the runs arrive (as the langfuse exporter does with keys in the YAML).
func TestLangSmithKeyInYAMLExportsWithoutEnvSwitch(t *testing.T) {
	fake := fakevendor.NewLangSmith(langSmithTestKey)
	defer fake.Close()
	clearLangSmithEnv(t)
	otlpAddr := FreeAddr(t)
	c := Start(t, LangSmithCollectorConfig(otlpAddr, fmt.Sprintf(`      endpoint: %q
      api_key: %s
      project: yaml-only`, fake.URL, langSmithTestKey), ""), otlpAddr)

	td, _ := fakevendor.AgentTrace(1, time.Now().Add(-time.Minute))
	StripMergedUsage(td)
	require.NoError(t, SendOTLPHTTP(context.Background(), otlpAddr, td))
	waitForRuns(t, fake, 8, 30*time.Second)
	assert.Empty(t, fake.Violations())
	for _, r := range fake.Runs() {
		assert.Equal(t, "yaml-only", r["session_name"])
	}
	logs := c.Logs()
	assert.NotContains(t, logs, "LangSmith tracing is disabled")
	assert.NotContains(t, logs, langSmithTestKey)
	assert.NotContains(t, logs, fake.URL, "the endpoint is never logged")
}

// Enabled without a key: the collector refuses to start with DeerFlow's message.
func TestLangSmithEnabledWithoutKeyRefusesToStart(t *testing.T) {
	clearLangSmithEnv(t)
	t.Setenv("LANGCHAIN_TRACING_V2", "true")
	otlpAddr := FreeAddr(t)
	c := Start(t, LangSmithCollectorConfig(otlpAddr, "      project: p", ""), "")
	err := c.Wait(60 * time.Second)
	require.Error(t, err, "the collector must exit")
	assert.Contains(t, c.Logs(), "LangSmith tracing is enabled but LANGSMITH_API_KEY (or LANGCHAIN_API_KEY) is not set.")
}

// A wrong key with check_credentials: the collector refuses to start, naming the key
// setting but never its value.
func TestLangSmithWrongKeyFailsStart(t *testing.T) {
	fake := fakevendor.NewLangSmith(langSmithTestKey)
	defer fake.Close()
	clearLangSmithEnv(t)
	otlpAddr := FreeAddr(t)
	c := Start(t, LangSmithCollectorConfig(otlpAddr, fmt.Sprintf(`      enabled: true
      endpoint: %q
      api_key: not-the-right-key-value
      check_credentials: true`, fake.URL), ""), "")
	err := c.Wait(60 * time.Second)
	require.Error(t, err)
	logs := c.Logs()
	assert.Contains(t, logs, "LangSmith rejected the credentials (HTTP 401 on /sessions)")
	assert.NotContains(t, logs, "not-the-right-key-value")
}

// Spans queued in a file_storage-backed sending queue while LangSmith is down survive
// a collector restart and are delivered by the next process.
func TestLangSmithPersistentQueueSurvivesRestart(t *testing.T) {
	fake := fakevendor.NewLangSmith(langSmithTestKey)
	defer fake.Close()
	clearLangSmithEnv(t)
	fake.SetDown(503)

	dir := t.TempDir()
	otlpAddr := FreeAddr(t)
	exporter := fmt.Sprintf(`      enabled: true
      endpoint: %q
      api_key: %s
      sending_queue: {storage: file_storage, num_consumers: 1}
      retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 0s}`, fake.URL, langSmithTestKey)
	extensions := fmt.Sprintf("  file_storage:\n    directory: %q\n", filepath.Join(dir, "queue"))
	cfg := LangSmithCollectorConfig(otlpAddr, exporter, extensions, "file_storage")
	require.NoError(t, mkdir(filepath.Join(dir, "queue")))

	first := StartIn(t, dir, cfg, otlpAddr)
	td, _ := fakevendor.AgentTrace(2, time.Now().Add(-time.Minute))
	require.NoError(t, SendOTLPHTTP(context.Background(), otlpAddr, td))
	deadline := time.Now().Add(30 * time.Second)
	for len(fake.Requests()) < 2 { // refused at least once: the batch is in the queue
		require.True(t, time.Now().Before(deadline), "no delivery attempt reached the fake")
		time.Sleep(50 * time.Millisecond)
	}
	first.Stop()
	require.Zero(t, fake.RunCount())

	fake.SetDown(0)
	StartIn(t, dir, cfg, otlpAddr)
	waitForRuns(t, fake, 8, 30*time.Second)
	assert.Empty(t, fake.Violations())
}
