package middleware

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	_ "github.com/agentmeter/agentmeter/runtime/model/scripted" // provider "scripted"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/subagent"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// allMiddlewaresConfig enables every middleware agentmeter has (summarization with a
// trigger the prior history crosses, plan mode, a vision model, guardrails, token budget,
// a memory model).
func allMiddlewaresConfig(t testing.TB, base string) *config.Config {
	script, err := filepath.Abs(filepath.Join("testdata", "all_middlewares.yaml"))
	require.NoError(t, err)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
models:
  - {name: main, provider: scripted, model: scripted-demo, script: %q, supports_vision: true}
summarization: {enabled: true, max_tokens_before_summary: 1500, keep_messages: 2}
token_budget: {enabled: true}
tool_progress: {enabled: true}
guardrails: {enabled: true, provider: tool_policy, deny_tools: [web_search]}
settings:
  runtime: {base_dir: %q}
  memory: {model_name: main}
  plan_mode: {enabled: true}
`, script, base)))
	require.NoError(t, err)
	return cfg
}

type runFixture struct {
	agent   *agent.Agent
	sandbox sandbox.Sandbox
	chain   []agent.Middleware
}

// newRunFixture wires the lead agent like cmd/agentmeter's run command: the lead chain,
// the subagent chain on the task tool's executor, built-in tools and a sandbox.
func newRunFixture(t testing.TB, cfg *config.Config, dir string) runFixture {
	models, err := model.NewFactory(cfg.Models)
	require.NoError(t, err)
	lead := models.Default()
	opts := Options{Config: ConfigFrom(cfg), Model: lead, Models: models}
	chain, err := BuildMiddlewares(opts)
	require.NoError(t, err)
	sub, err := BuildSubagentMiddlewares(opts)
	require.NoError(t, err)
	base := tool.Builtins(tool.Bash{Timeout: 10 * time.Second}, nil)
	exec, err := subagent.NewExecutor(subagent.Options{Model: lead, Tools: base,
		Middlewares: func(subagent.Type) []agent.Middleware { return sub }})
	require.NoError(t, err)
	a, err := agent.New(agent.Config{Model: lead, Models: models, Middlewares: chain,
		Tools: append(append([]tool.Tool(nil), base...), &subagent.TaskTool{Executor: exec})})
	require.NoError(t, err)
	sb, err := sandbox.NewLocal(dir, "thread-all")
	require.NoError(t, err)
	return runFixture{agent: a, sandbox: sb, chain: chain}
}

func spanAttr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func spanStr(s sdktrace.ReadOnlySpan, key string) string {
	v, _ := spanAttr(s, key)
	return v.AsString()
}

func spanUsage(s sdktrace.ReadOnlySpan) genai.Usage {
	get := func(k string) int64 { v, _ := spanAttr(s, k); return v.AsInt64() }
	return genai.Usage{Input: get(genai.AttrUsageInput), Output: get(genai.AttrUsageOutput),
		CacheRead: get(genai.AttrUsageCacheRead), CacheCreation: get(genai.AttrUsageCacheCreat), Reasoning: get(genai.AttrUsageReasoning)}
}

// A run on the scripted model with every middleware enabled: the exported spans and the
// journal's CompletionData agree (own-usage sum == journal total, per caller bucket), the
// middlewares' own model calls (title, summarize, memory) are chat spans under the lead
// invoke_agent span in the middleware bucket, every lead chat span carries its step kind,
// and the subagent usage merged onto the dispatching AI message never touches span usage.
func TestRunWithEveryMiddlewareKeepsSpansAndJournalConsistent(t *testing.T) {
	dir := t.TempDir()
	cfg := allMiddlewaresConfig(t, filepath.Join(dir, "base"))
	fx := newRunFixture(t, cfg, filepath.Join(dir, "threads"))
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx := telemetry.WithTracerProvider(context.Background(), tp)
	j := journal.New(journal.Options{RunID: "run-all", ThreadID: "thread-all"})
	long := strings.Repeat("Earlier discussion about travel plans. ", 110)
	prior := &state.State{Messages: []message.Message{human("old-1", long), human("old-2", long)}}

	res, err := fx.agent.Run(ctx, agent.Input{ThreadID: "thread-all", RunID: "run-all", UserID: "user-7", Journal: j,
		Sandbox: fx.sandbox, State: prior, Messages: []message.Message{message.Human("Compare Paris and Tokyo")}})
	require.NoError(t, err)
	require.NoError(t, tp.ForceFlush(context.Background()))
	assert.Equal(t, "All done: Paris is far smaller than Tokyo; see report.md.", res.Answer)
	assert.Empty(t, res.StopReason)
	assert.Equal(t, "Paris vs Tokyo", res.State.Title)
	assert.Contains(t, res.State.Extra[SummaryTextKey], "Summary:")
	for _, m := range res.State.Messages {
		assert.NotContains(t, []string{"old-1", "old-2"}, m.ID, "old history compacted")
	}

	spans := exp.GetSpans().Snapshots()
	var lead sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "invoke_agent lead_agent" {
			lead = s
		}
	}
	require.NotNil(t, lead)
	var own genai.Usage
	buckets := map[string]int64{}
	var mwCallers, stepKinds []string
	dispatchSpanUsage := genai.Usage{}
	for _, s := range spans {
		if spanStr(s, genai.AttrOperationName) != genai.OpChat {
			continue
		}
		u := spanUsage(s)
		own = own.Add(u)
		caller := spanStr(s, genai.AttrCaller)
		buckets[genai.CallerBucket(caller)] += u.Total()
		switch genai.CallerBucket(caller) {
		case genai.BucketMiddleware:
			mwCallers = append(mwCallers, caller)
			assert.Equal(t, lead.SpanContext().SpanID(), s.Parent().SpanID(), "middleware call is a child of the lead invoke_agent span")
			assert.Equal(t, "chat scripted-demo", s.Name())
			_, has := spanAttr(s, genai.AttrStepKind)
			assert.False(t, has, "step kinds are for lead responses only")
		case genai.BucketLeadAgent:
			kind, ok := spanAttr(s, genai.AttrStepKind)
			require.True(t, ok, "every lead chat span carries agentmeter.step.kind")
			stepKinds = append(stepKinds, kind.AsString())
			if v, ok := spanAttr(s, genai.AttrResponseToolCallIDs); ok && len(v.AsStringSlice()) == 2 && v.AsStringSlice()[0] == "call_task_paris" {
				dispatchSpanUsage = u
			}
		}
	}
	cd := j.CompletionData()
	assert.Equal(t, cd.TotalTokens, own.Total(), "own-usage sum == journal total")
	assert.Equal(t, cd.LeadAgentTokens, buckets[genai.BucketLeadAgent])
	assert.Equal(t, cd.SubagentTokens, buckets[genai.BucketSubagent])
	assert.Equal(t, cd.MiddlewareTokens, buckets[genai.BucketMiddleware])
	assert.Equal(t, int64(186+940+312), cd.MiddlewareTokens, "title + summarize + memory from the script")
	assert.ElementsMatch(t, []string{TitleCaller, SummarizeCaller, MemoryCaller}, mwCallers)
	var byModel int64
	for _, b := range cd.TokenUsageByModel {
		byModel += b.TotalTokens
	}
	assert.Equal(t, cd.TotalTokens, byModel)
	assert.Equal(t, []string{"tool_batch", "tool_batch", "tool_batch", "tool_batch", "final_answer", "todo_update", "final_answer"}, stepKinds)

	// The dispatcher's usage_metadata carries its own usage plus both subagents'; its span
	// keeps only its own (docs/contract.md#usage).
	assert.Equal(t, genai.Usage{Input: 1350, Output: 140, CacheRead: 1152}, dispatchSpanUsage)
	var dispatcher message.Message
	for _, m := range res.State.Messages {
		if m.IsAI() && len(m.ToolCalls) == 2 && m.ToolCalls[0].ID == "call_task_paris" {
			dispatcher = m
		}
		if m.IsTool() && m.Name == genai.TaskToolName {
			assert.Equal(t, true, m.AdditionalKwargs[KwargUsageAttributed], "merged task results are marked")
		}
	}
	require.NotNil(t, dispatcher.UsageMetadata)
	assert.Equal(t, int64(1490)+cd.SubagentTokens, dispatcher.UsageMetadata.TotalTokens)
}
