//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// agentusageConfig runs the agentusage receiver into subagentmerge and the file
// exporter, as the sidecar does.
func agentusageConfig(addr, out string) string {
	return mergeToFileConfig("agentusage", fmt.Sprintf("{endpoint: %q, api_keys: [test-key, sk-lf-test]}", addr), out)
}

func startAgentusage(t *testing.T) (addr, out string) {
	t.Helper()
	addr = fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	dir := t.TempDir()
	out = filepath.Join(dir, "traces.jsonl")
	StartIn(t, dir, agentusageConfig(addr, out), addr)
	return addr, out
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// The official LangSmith JS SDK (RunTree, POST then PATCH per run, multipart) sends a
// lead run whose model call dispatches two task subagents; the receiver turns the runs
// into the contract's span tree and subagentmerge merges both subagents' usage onto
// the dispatching chat span.
func TestAgentUsageLangSmithSDKLeadWithTwoSubagentsIsMerged(t *testing.T) {
	addr, out := startAgentusage(t)
	RunNode(t, "langsmith-deerflow-run.mjs", "LANGSMITH_ENDPOINT=http://"+addr, "LANGSMITH_API_KEY=test-key")
	tr := NewSpanTree(WaitForSettledSpans(t, out, 9, 30*time.Second))
	require.Len(t, tr.ByID, 9, "one span per run, POST+PATCH pairs merged")

	roots := tr.Named("invoke_agent lead_agent")
	require.Len(t, roots, 1)
	root := roots[0]
	assert.True(t, root.ParentSpanID().IsEmpty())
	assert.Equal(t, "thread-ls", Str(root, genai.AttrConversationID))
	assert.Equal(t, "run-ls", Str(root, genai.AttrRunID))

	var dispatch, final ptrace.Span
	for _, s := range tr.Named("chat gpt-4o") {
		p, ok := tr.Parent(s)
		require.True(t, ok)
		assert.Equal(t, root.SpanID(), p.SpanID())
		if len(genai.StringsFromMap(s.Attributes(), genai.AttrResponseToolCallIDs)) > 0 {
			dispatch = s
		} else {
			final = s
		}
	}
	require.NotEqual(t, ptrace.Span{}, dispatch, "dispatching chat span")
	require.NotEqual(t, ptrace.Span{}, final, "final chat span")
	assert.Equal(t, []string{"call_a", "call_b"}, genai.StringsFromMap(dispatch.Attributes(), genai.AttrResponseToolCallIDs))
	own, _ := genai.UsageFromMap(dispatch.Attributes())
	assert.Equal(t, genai.Usage{Input: 1000, Output: 50, CacheRead: 400}, own, "own usage never changes")
	merged, ok := genai.SubagentUsageFromMap(dispatch.Attributes())
	require.True(t, ok, "subagentmerge wrote merged usage")
	assert.Equal(t, genai.Usage{Input: 500, Output: 100, CacheRead: 50, Reasoning: 10}, merged)
	assert.Equal(t, int64(2), Int(dispatch, genai.AttrSubagentDispatches))
	assert.Equal(t, []string{"call_a", "call_b"}, sortedStrings(genai.StringsFromMap(dispatch.Attributes(), genai.AttrSubagentToolCallIDs)))

	tools := tr.Named("execute_tool task")
	require.Len(t, tools, 2)
	for _, tool := range tools {
		assert.Equal(t, genai.MergeMerged, Str(tool, genai.AttrMergeStatus))
		assert.Equal(t, genai.SubagentCompleted, Str(tool, genai.AttrSubagentStatus))
		call := Str(tool, genai.AttrToolCallID)
		name := map[string]string{"call_a": "general-purpose", "call_b": "researcher"}[call]
		require.NotEmpty(t, name, "tool call id %q", call)
		agents := tr.Named("invoke_agent " + name)
		require.Len(t, agents, 1)
		p, _ := tr.Parent(agents[0])
		assert.Equal(t, tool.SpanID(), p.SpanID(), "subagent hangs under its task call")
		assert.Equal(t, genai.SubagentCaller(name), Str(agents[0], genai.AttrCaller))
		assert.Equal(t, call, Str(agents[0], genai.AttrToolCallID))
	}
	for _, s := range tr.Named("chat gpt-4o-mini") {
		p, _ := tr.Parent(s)
		assert.Equal(t, genai.OpInvokeAgent, Str(p, genai.AttrOperationName))
		assert.Equal(t, Str(p, genai.AttrCaller), Str(s, genai.AttrCaller))
	}
	assert.Equal(t, genai.Usage{Input: 3000, Output: 230, CacheRead: 450, Reasoning: 10}, tr.OwnUsageSum(),
		"the trace's own usage is exactly what the SDK reported")
}

// The Langfuse JS SDK v3 posts create/update events to /api/public/ingestion in
// several concurrent batches, out of order; the receiver reassembles them, converts
// Langfuse's exclusive usage buckets to the contract's inclusive ones, and the
// subagent's usage is merged.
func TestAgentUsageLangfuseV3SDK(t *testing.T) {
	addr, out := startAgentusage(t)
	RunNode(t, "langfuse-v3-ingestion.mjs", "LANGFUSE_BASE_URL=http://"+addr)
	tr := NewSpanTree(WaitForSettledSpans(t, out, 5, 30*time.Second))
	require.Len(t, tr.ByID, 5)

	var dispatch, sub ptrace.Span
	for _, s := range tr.ByID {
		if Str(s, genai.AttrOperationName) != genai.OpChat {
			continue
		}
		if Str(s, genai.AttrRequestModel) == "gpt-4o" {
			dispatch = s
		} else {
			sub = s
		}
		assert.Equal(t, "thread-lf3", Str(s, genai.AttrConversationID))
		assert.Equal(t, "user-1", Str(s, genai.AttrEndUserID))
		assert.Equal(t, "run-lf3", Str(s, genai.AttrRunID))
	}
	own, _ := genai.UsageFromMap(dispatch.Attributes())
	assert.Equal(t, genai.Usage{Input: 1000, Output: 50, CacheRead: 400}, own)
	assert.Equal(t, []string{"call_x"}, genai.StringsFromMap(dispatch.Attributes(), genai.AttrResponseToolCallIDs))
	subOwn, _ := genai.UsageFromMap(sub.Attributes())
	assert.Equal(t, genai.Usage{Input: 200, Output: 40, CacheRead: 50, Reasoning: 10}, subOwn)
	assert.Equal(t, "subagent:general-purpose", Str(sub, genai.AttrCaller))
	merged, ok := genai.SubagentUsageFromMap(dispatch.Attributes())
	require.True(t, ok)
	assert.Equal(t, subOwn, merged)

	tools := tr.Named("execute_tool task")
	require.Len(t, tools, 1)
	assert.Equal(t, "call_x", Str(tools[0], genai.AttrToolCallID))
	assert.Equal(t, genai.MergeMerged, Str(tools[0], genai.AttrMergeStatus))
	root := tr.Named("invoke_agent lead_agent")
	require.Len(t, root, 1)
	p, _ := tr.Parent(tools[0])
	assert.Equal(t, root[0].SpanID(), p.SpanID())
}

// The OTel-based Langfuse JS SDK (@langfuse/otel) exports OTLP/HTTP with langfuse.*
// attributes; the receiver maps them to the contract.
func TestAgentUsageLangfuseOTelSDK(t *testing.T) {
	addr, out := startAgentusage(t)
	RunNode(t, "langfuse-otel.mjs", "LANGFUSE_BASE_URL=http://"+addr)
	tr := NewSpanTree(WaitForSettledSpans(t, out, 5, 30*time.Second))
	require.Len(t, tr.ByID, 5)

	dispatches := tr.Named("chat gpt-4o")
	require.Len(t, dispatches, 1)
	d := dispatches[0]
	assert.Equal(t, ptrace.SpanKindClient, d.Kind())
	own, _ := genai.UsageFromMap(d.Attributes())
	assert.Equal(t, genai.Usage{Input: 1000, Output: 40, CacheRead: 300}, own)
	assert.Equal(t, []string{"call_o"}, genai.StringsFromMap(d.Attributes(), genai.AttrResponseToolCallIDs))
	assert.Equal(t, "thread-lfotel", Str(d, genai.AttrConversationID))
	// nothing in the request names its caller: none is written, which counts as the lead
	assert.Equal(t, genai.BucketLeadAgent, genai.CallerBucket(Str(d, genai.AttrCaller)))
	merged, ok := genai.SubagentUsageFromMap(d.Attributes())
	require.True(t, ok)
	assert.Equal(t, genai.Usage{Input: 250, Output: 30, Reasoning: 5}, merged)

	tools := tr.Named("execute_tool task")
	require.Len(t, tools, 1)
	assert.Equal(t, "call_o", Str(tools[0], genai.AttrToolCallID))
	agents := tr.Named("invoke_agent researcher")
	require.Len(t, agents, 1)
	assert.Equal(t, "subagent:researcher", Str(agents[0], genai.AttrCaller))
}

// Native records (the RunJournal shape) over plain HTTP: a lead record that dispatched
// two task calls and one record from each subagent come out merged.
func TestAgentUsageNativeRecordsAreMerged(t *testing.T) {
	addr, out := startAgentusage(t)
	body := []byte(`{"records":[
 {"thread_id":"t-n","run_id":"run-n","source_run_id":"lead-1","caller":"lead_agent","model_name":"gpt-4o","provider":"openai",
  "input_tokens":100,"output_tokens":10,"response_tool_call_ids":["c1","c2"],"start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:01Z"},
 {"thread_id":"t-n","run_id":"run-n","source_run_id":"sub-1","caller":"subagent:general-purpose","model_name":"gpt-4o-mini",
  "input_tokens":20,"output_tokens":4,"tool_call_id":"c1","start_time":"2026-01-01T00:00:02Z","end_time":"2026-01-01T00:00:03Z"},
 {"thread_id":"t-n","run_id":"run-n","source_run_id":"sub-2","caller":"subagent:bash","model_name":"gpt-4o-mini",
  "input_tokens":30,"output_tokens":6,"cache_read_tokens":10,"tool_call_id":"c2","start_time":"2026-01-01T00:00:02Z","end_time":"2026-01-01T00:00:04Z"}
]}`)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/usage", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer test-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	tr := NewSpanTree(WaitForSettledSpans(t, out, 8, 30*time.Second))
	require.Len(t, tr.ByID, 8, "root, lead chat, 2×(task, subagent, chat)")
	lead := tr.Named("chat gpt-4o")
	require.Len(t, lead, 1)
	merged, ok := genai.SubagentUsageFromMap(lead[0].Attributes())
	require.True(t, ok)
	assert.Equal(t, genai.Usage{Input: 50, Output: 10, CacheRead: 10}, merged)
	assert.Equal(t, int64(2), Int(lead[0], genai.AttrSubagentDispatches))
}
