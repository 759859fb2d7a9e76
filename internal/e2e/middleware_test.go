//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/genai"
)

// mwConfigYAML enables every middleware of the lead chain for `agentmeter run` on the
// scripted model (script: middleware/testdata/all_middlewares.yaml): plan mode, a vision
// model, guardrails, token budget, summarization (armed, with a trigger this fresh thread
// never reaches) and model-written memory.
func mwConfigYAML(dir string) string {
	return fmt.Sprintf(`
models:
  - name: main
    provider: scripted
    model: scripted-demo
    script: %q
    supports_vision: true
sandbox:
  root: %q
circuit_breaker: {enabled: true, failure_threshold: 5, recovery_timeout_sec: 30, base_delay_ms: 500, cap_delay_ms: 8000}
guardrails: {enabled: true, provider: tool_policy, fail_closed: true, deny_tools: [web_search]}
token_usage: {enabled: true}
loop_detection: {enabled: true, window_size: 20, warn_threshold: 3, hard_limit: 5}
safety_finish_reason: {enabled: true}
tool_search: {enabled: false}
summarization: {enabled: true, max_tokens_before_summary: 120000}
token_budget: {enabled: true}
tool_progress: {enabled: true}
title: {max_words: 6, max_chars: 60}
settings:
  runtime: {base_dir: %q, lazy_init: true}
  sandbox: {provider: local, lazy_init: true}
  memory: {injection_enabled: true, model_name: main}
  subagent: {enabled: true, max_concurrent: 3}
  plan_mode: {enabled: true, max_completion_reminders: 2}
`, filepath.Join(RepoRoot(), "middleware", "testdata", "all_middlewares.yaml"), filepath.Join(dir, "threads"), filepath.Join(dir, "base"))
}

// `agentmeter run` with every middleware enabled, exported to the ocb-built collector:
// own usage of the chat spans sums to the journal total per caller bucket, the middleware
// model calls (title, memory) are chat spans of their own under the lead invoke_agent
// span, every lead chat span carries agentmeter.step.kind, and `agentmeter chain` prints
// the chain that ran.
func TestMiddlewareChainRunThroughCollector(t *testing.T) {
	cli := AgentmeterBinary(t)
	dir := t.TempDir()
	sink := StartTraceSink(t, dir)
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(mwConfigYAML(dir)), 0o600))

	// The chain command describes the chain of this config.
	var chainOut, chainErr bytes.Buffer
	chain := exec.Command(cli, "chain", "--config", cfgPath, "--json")
	chain.Stdout, chain.Stderr = &chainOut, &chainErr
	require.NoError(t, chain.Run(), chainErr.String())
	var described struct {
		Middlewares []string            `json:"middlewares"`
		Hooks       map[string][]string `json:"hooks"`
	}
	require.NoError(t, json.Unmarshal(chainOut.Bytes(), &described), chainOut.String())
	assert.Equal(t, []string{"InputSanitizationMiddleware", "ToolOutputBudgetMiddleware", "ToolResultSanitizationMiddleware",
		"ThreadDataMiddleware", "UploadsMiddleware", "SandboxMiddleware", "DanglingToolCallMiddleware",
		"LLMErrorHandlingMiddleware", "GuardrailMiddleware", "SandboxAuditMiddleware", "ReadBeforeWriteMiddleware",
		"ToolProgressMiddleware", "ToolErrorHandlingMiddleware", "DynamicContextMiddleware", "DurableContextMiddleware",
		"SummarizationMiddleware", "TodoMiddleware", "TokenUsageMiddleware", "TitleMiddleware", "MemoryMiddleware",
		"ViewImageMiddleware", "SystemMessageCoalescingMiddleware", "SubagentLimitMiddleware", "LoopDetectionMiddleware",
		"TokenBudgetMiddleware", "TerminalResponseMiddleware", "ModelLengthFinishReasonMiddleware",
		"SafetyFinishReasonMiddleware", "ClarificationMiddleware"}, described.Middlewares)
	for _, h := range []string{"before_agent", "before_model", "wrap_model_call", "after_model", "wrap_tool_call", "after_agent"} {
		assert.Contains(t, described.Hooks, h)
	}
	assert.Equal(t, "SafetyFinishReasonMiddleware", described.Hooks["after_model"][0], "safety sees every response first")

	var res runJSON
	RunAgentJSON(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sink.OTLP, "OTEL_SERVICE_NAME=agentmeter-mw-e2e"}, &res,
		"--config", cfgPath, "--thread", "mw-thread", "--user", "user-9", "Compare Paris and Tokyo")
	assert.Equal(t, "All done: Paris is far smaller than Tokyo; see report.md.", res.Answer, "plan mode sent the first answer back once")

	// 1 lead + 7 lead chats + title + memory + 7 lead tools + 2 subagents (5 chats, 3 tools).
	const wantSpans = 1 + 7 + 2 + 7 + 2 + 5 + 3
	spans := WaitForExactSpans(t, sink.Traces, wantSpans, 30*time.Second)

	var lead ptrace.Span
	for _, s := range spans {
		if s.Name() == "invoke_agent lead_agent" {
			lead = s
		}
	}
	require.NotEqual(t, pcommon.SpanID{}, lead.SpanID())
	buckets := map[string]int64{}
	var own int64
	var mwCallers, kinds []string
	for _, s := range spans {
		a := s.Attributes()
		assert.Equal(t, res.TraceID, s.TraceID().String())
		if genai.StringAttr(a, genai.AttrOperationName) != genai.OpChat {
			continue
		}
		u, ok := genai.UsageFromMap(a)
		require.True(t, ok, s.Name())
		own += u.Total()
		caller := genai.StringAttr(a, genai.AttrCaller)
		buckets[genai.CallerBucket(caller)] += u.Total()
		switch genai.CallerBucket(caller) {
		case genai.BucketMiddleware:
			mwCallers = append(mwCallers, caller)
			assert.Equal(t, lead.SpanID(), s.ParentSpanID(), "middleware chat span under the lead invoke_agent span")
		case genai.BucketLeadAgent:
			kinds = append(kinds, genai.StringAttr(a, genai.AttrStepKind))
		}
	}
	c := res.Completion
	assert.Equal(t, c.TotalTokens, own, "own-usage sum == journal total")
	assert.Equal(t, c.LeadAgentTokens, buckets[genai.BucketLeadAgent])
	assert.Equal(t, c.SubagentTokens, buckets[genai.BucketSubagent])
	assert.Equal(t, c.MiddlewareTokens, buckets[genai.BucketMiddleware])
	assert.Equal(t, int64(186+312), c.MiddlewareTokens, "title and memory calls from the script")
	assert.ElementsMatch(t, []string{"middleware:title", "middleware:memory"}, mwCallers)
	assert.Equal(t, []string{"tool_batch", "tool_batch", "tool_batch", "tool_batch", "final_answer", "todo_update", "final_answer"}, kinds)
}
