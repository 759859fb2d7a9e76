//go:build e2e

package e2e

import (
	"context"
	"fmt"
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
// revision 2, whole (trace name and usage details of the first emission included), and
// the trace's usage total stays the own usage.
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
	require.Eventually(t, func() bool {
		rows := srv.Rows()
		row = langfusefake.ByID(rows)[chat.String()]
		return len(rows) == td.SpanCount() && row.Metadata["subagent_input_tokens"] != nil &&
			fmt.Sprint(row.Metadata["subagent_input_tokens"]) == "9000"
	}, 30*time.Second, 50*time.Millisecond, "revision 2 never became the row")
	// give a stale version that was still queued every chance to arrive
	time.Sleep(time.Second)
	row = langfusefake.ByID(srv.Rows())[chat.String()]
	assert.EqualValues(t, 9000, row.Metadata["subagent_input_tokens"], "revision 1 never replaced revision 2")
	assert.Equal(t, genai.MergeCorrected, row.Metadata["merge_status"])
	assert.Equal(t, "lead-agent", row.TraceName)
	assert.Equal(t, map[string]int64{"input": 1000, "input_cached_tokens": 200, "output": 200, "output_reasoning_tokens": 100, "total": 1500}, row.Usage)
	assert.Equal(t, run.OwnTotal(), langfusefake.TraceUsage(srv.Rows())[tid.String()])
	assert.Empty(t, srv.Problems())
}
