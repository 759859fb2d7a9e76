//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

// Through the ocb-built collector with a persistent queue of four consumers (so requests
// may leave in any order): a trace, then its dispatcher re-emitted as revision 2 and then
// revision 1, each in its own request. The row Langfuse keeps for the dispatcher is
// revision 2, whole (the call's own usage details included), and the trace's usage
// total stays the own usage. (Which trace values revision 2 carries depends on whether
// its trace's root left before it: the consumers may send it first.)
func TestLangfuseReemissionsThroughCollector(t *testing.T) {
	LangfuseEnv(t)
	srv := langfusefake.New(t)
	dir := t.TempDir()
	otlpAddr := FreeAddr(t)
	cfg := LangfuseCollectorConfig(otlpAddr,
		langfuseExporterYAML(srv, "    sending_queue: {storage: file_storage, num_consumers: 4}\n"),
		fmt.Sprintf("  file_storage:\n    directory: %q\n", dir), "file_storage")
	Start(t, cfg, otlpAddr)

	run := langfusefake.DefaultAgentRun()
	td, tid, ids := langfusefake.AgentTrace(run)
	chat := ids[langfusefake.RoleLeadChat1]
	ctx := context.Background()
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, td))
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, fakevendor.Reemission(td, chat, 2, genai.Usage{Input: 9000, Output: 900})))
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, fakevendor.Reemission(td, chat, 1, genai.Usage{Input: 7000, Output: 700})))

	var row langfusefake.Observation
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows := srv.Rows()
		row = langfusefake.ByID(rows)[chat.String()]
		if len(rows) == td.SpanCount() && row.Metadata["subagent_input_tokens"] == int64(9000) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision 2 never became the row: %d rows, dispatcher metadata %v, %d requests, problems %v",
				len(rows), row.Metadata, len(srv.Requests()), srv.Problems())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// give a stale version that was still queued every chance to arrive
	time.Sleep(time.Second)
	row = langfusefake.ByID(srv.Rows())[chat.String()]
	assert.EqualValues(t, 9000, row.Metadata["subagent_input_tokens"], "revision 1 never replaced revision 2")
	assert.Equal(t, genai.MergeCorrected, row.Metadata["merge_status"])
	assert.Equal(t, map[string]int64{"input": 1000, "input_cached_tokens": 200, "output": 200, "output_reasoning_tokens": 100, "total": 1500}, row.Usage)
	assert.Equal(t, run.OwnTotal(), langfusefake.TraceUsage(srv.Rows())[tid.String()])
	assert.Empty(t, srv.Problems())
}

// langSmithQueueConfig is OTLP/HTTP → langsmith with a persistent queue of four
// consumers and no processor, so requests reach the exporter in any order.
func langSmithQueueConfig(otlpAddr, endpoint, dir string) string {
	return fmt.Sprintf(`extensions:
  file_storage: {directory: %q}
receivers:
  otlp:
    protocols:
      http: {endpoint: %q}
exporters:
  langsmith:
    endpoint: %q
    api_key: %s
    sending_queue: {storage: file_storage, num_consumers: 4}
service:
  extensions: [file_storage]
  telemetry: {metrics: {level: none}, logs: {level: info}}
  pipelines:
    traces: {receivers: [otlp], exporters: [langsmith]}
`, dir, otlpAddr, endpoint, langSmithTestKey)
}

// Through the ocb-built collector: a trace, then its dispatcher re-emitted as revision 2
// and then revision 1, each in its own request. LangSmith gets the dispatcher's update as
// a patch, never a second post (no 409), and keeps revision 2.
func TestLangSmithReemissionsThroughCollector(t *testing.T) {
	fake := fakevendor.NewLangSmith(langSmithTestKey)
	defer fake.Close()
	clearLangSmithEnv(t)
	otlpAddr := FreeAddr(t)
	c := Start(t, langSmithQueueConfig(otlpAddr, fake.URL, t.TempDir()), otlpAddr)

	td, ids := fakevendor.AgentTrace(7, time.Now().Add(-time.Minute))
	ctx := context.Background()
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, td))
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, fakevendor.Reemission(td, ids.LeadChat, 2, genai.Usage{Input: 900, Output: 99})))
	require.NoError(t, SendOTLPHTTP(ctx, otlpAddr, fakevendor.Reemission(td, ids.LeadChat, 1, genai.Usage{Input: 700, Output: 90})))

	subagentInput := func() any {
		for _, r := range fake.Runs() {
			if r["name"] != "chat gpt-4o" {
				continue
			}
			md := r["extra"].(map[string]any)["metadata"].(map[string]any)
			su, _ := md["subagent_usage"].(map[string]any)
			u, _ := su["usage"].(map[string]any)
			return u["input_tokens"]
		}
		return nil
	}
	require.Eventually(t, func() bool { return fake.RunCount() == 8 && subagentInput() == 900.0 },
		30*time.Second, 50*time.Millisecond, "revision 2 never reached the run")
	time.Sleep(time.Second) // a stale version still queued would land by now
	assert.Equal(t, 900.0, subagentInput(), "revision 1 never replaced revision 2")
	assert.Empty(t, fake.Violations())
	for _, r := range fake.Requests() {
		assert.NotEqual(t, http.StatusConflict, r.Status, "a run was posted twice")
	}
	assert.Zero(t, fake.PendingPatches())
	assert.NotContains(t, c.Logs(), langSmithTestKey)
}
