package shape

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/exporter/internal/vendortest"
	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/internal/fakevendor/langfusefake"
)

func TestUsageBuckets(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   genai.Usage
		want Buckets
		json string
	}{
		{
			name: "plain",
			in:   genai.Usage{Input: 100, Output: 20},
			want: Buckets{Input: 100, Output: 20, Total: 120},
			json: `{"input":100,"output":20,"total":120}`,
		},
		{
			name: "openai style: cached prompt tokens and reasoning inside the totals",
			in:   genai.Usage{Input: 1200, Output: 300, CacheRead: 200, Reasoning: 100},
			want: Buckets{Input: 1000, CacheRead: 200, Output: 200, Reasoning: 100, Total: 1500},
			json: `{"input":1000,"input_cached_tokens":200,"output":200,"output_reasoning_tokens":100,"total":1500}`,
		},
		{
			name: "anthropic style normalised per docs/contract.md#usage (input includes cache read and creation)",
			in:   genai.Usage{Input: 2600, Output: 400, CacheRead: 2000, CacheCreation: 500},
			want: Buckets{Input: 100, CacheRead: 2000, CacheCreation: 500, Output: 400, Total: 3000},
			json: `{"input":100,"input_cached_tokens":2000,"input_cache_creation":500,"output":400,"total":3000}`,
		},
		{
			name: "anthropic raw (input without cache) is not clamped away",
			in:   genai.Usage{Input: 100, Output: 400, CacheRead: 2000, CacheCreation: 500},
			want: Buckets{Input: 100, CacheRead: 2000, CacheCreation: 500, Output: 400, Total: 3000},
			json: `{"input":100,"input_cached_tokens":2000,"input_cache_creation":500,"output":400,"total":3000}`,
		},
		{
			name: "negative counts are zero",
			in:   genai.Usage{Input: -5, Output: 7, Reasoning: -1},
			want: Buckets{Output: 7, Total: 7},
			json: `{"input":0,"output":7,"total":7}`,
		},
		{
			name: "zero usage still reports input, output, total",
			in:   genai.Usage{},
			json: `{"input":0,"output":0,"total":0}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, UsageBuckets(tc.in))
			assert.Equal(t, tc.json, UsageDetails(tc.in))
			// exclusive buckets add up to the contract total: no token counted twice
			b := UsageBuckets(tc.in)
			if tc.in.CacheRead+tc.in.CacheCreation <= tc.in.Input && tc.in.Input >= 0 && tc.in.Output >= 0 {
				assert.Equal(t, tc.in.Total(), b.Total)
			}
		})
	}
}

func TestObservationType(t *testing.T) {
	assert.Equal(t, TypeGeneration, ObservationType(genai.OpChat))
	assert.Equal(t, TypeGeneration, ObservationType(genai.OpTextCompletion))
	assert.Equal(t, TypeGeneration, ObservationType(genai.OpGenerateContent))
	assert.Equal(t, TypeAgent, ObservationType(genai.OpInvokeAgent))
	assert.Equal(t, TypeTool, ObservationType(genai.OpExecuteTool))
	assert.Equal(t, TypeSpan, ObservationType(""))
	assert.Equal(t, TypeSpan, ObservationType("embeddings"))
}

// twoSpanTrace is a root invoke_agent and one chat; setup tweaks attributes.
func twoSpanTrace(setup func(root, chat ptrace.Span)) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("deployment.environment.name", "staging")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	tid := [16]byte{1, 2, 3}
	root := spans.AppendEmpty()
	root.SetTraceID(tid)
	root.SetSpanID([8]byte{1})
	root.SetName("invoke_agent lead_agent")
	root.Attributes().PutStr(genai.AttrOperationName, genai.OpInvokeAgent)
	root.Attributes().PutStr(genai.AttrAgentName, genai.LeadAgentName)
	chat := spans.AppendEmpty()
	chat.SetTraceID(tid)
	chat.SetSpanID([8]byte{2})
	chat.SetParentSpanID([8]byte{1})
	chat.SetName("chat gpt-4o")
	chat.Attributes().PutStr(genai.AttrOperationName, genai.OpChat)
	chat.Attributes().PutStr(genai.AttrRequestModel, "gpt-4o")
	chat.Attributes().PutStr(genai.AttrConversationID, "thread-1")
	genai.PutUsage(chat.Attributes(), genai.Usage{Input: 10, Output: 5})
	if setup != nil {
		setup(root, chat)
	}
	return td
}

func spanAt(td ptrace.Traces, i int) ptrace.Span {
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(i)
}

func get(t *testing.T, sp ptrace.Span, key string) string {
	t.Helper()
	v, ok := sp.Attributes().Get(key)
	require.True(t, ok, "missing %s on %s", key, sp.Name())
	return v.AsString()
}

// view is what Langfuse's server makes of a shaped span (the fake's emulation of its
// attribute mapping).
func view(td ptrace.Traces, i int) langfusefake.Observation {
	return langfusefake.Observe(spanAt(td, i))
}

func TestTraceAttributesOnEverySpan(t *testing.T) {
	td := twoSpanTrace(nil)
	Traces(td)
	for i := 0; i < 2; i++ {
		o := view(td, i)
		assert.Equal(t, "lead-agent", o.TraceName)
		assert.Equal(t, "thread-1", o.SessionID, "session from gen_ai.conversation.id of another span")
		assert.Equal(t, "default", o.UserID, "DeerFlow: user falls back to default")
		assert.Equal(t, []string{"env:staging", "model:gpt-4o"}, o.Tags)
	}
	assert.Equal(t, "thread-1", get(t, spanAt(td, 0), AttrSessionID), "stamped where missing")
	_, has := spanAt(td, 1).Attributes().Get(AttrSessionID)
	assert.False(t, has, "not duplicated where gen_ai.conversation.id already says it")

	assert.Equal(t, TypeAgent, view(td, 0).Type)
	assert.Equal(t, TypeGeneration, view(td, 1).Type)
	assert.Equal(t, "gpt-4o", view(td, 1).Model)
	assert.Equal(t, `{"input":10,"output":5,"total":15}`, get(t, spanAt(td, 1), AttrObservationUsage))
	assert.Empty(t, view(td, 0).Usage, "no usage on the agent span")
	// own usage untouched (docs/contract.md#usage)
	u, _ := genai.UsageFromMap(spanAt(td, 1).Attributes())
	assert.Equal(t, genai.Usage{Input: 10, Output: 5}, u)
}

// The type and model are written only where Langfuse would infer something else.
func TestTypeAndModelWhereInferenceDiffers(t *testing.T) {
	td := twoSpanTrace(func(root, chat ptrace.Span) {
		root.Attributes().Remove(genai.AttrOperationName)
		root.Attributes().PutStr(genai.AttrToolName, "not-a-tool-call") // would infer tool
		chat.Attributes().PutStr("ai.model.id", "vercel-model")         // would beat the request model
	})
	Traces(td)
	assert.Equal(t, TypeSpan, view(td, 0).Type)
	assert.Equal(t, "gpt-4o", view(td, 1).Model)

	td = twoSpanTrace(func(_, chat ptrace.Span) {
		chat.Attributes().PutStr("openinference.span.kind", "CHAIN")
	})
	Traces(td)
	assert.Equal(t, TypeGeneration, get(t, spanAt(td, 1), AttrObservationType))
}

// Caller-provided langfuse.* values win (DeerFlow's set-if-absent) and spread to
// the spans that lack them.
func TestEmitterValuesWin(t *testing.T) {
	td := twoSpanTrace(func(root, chat ptrace.Span) {
		root.Attributes().PutStr(AttrTraceName, "custom-agent")
		root.Attributes().PutStr(genai.AttrEndUserID, "alice")
		genai.PutStrings(chat.Attributes(), AttrTraceTags, []string{"team:a"})
		chat.Attributes().PutStr(AttrObservationType, "chain")
	})
	Traces(td)
	for i := 0; i < 2; i++ {
		o := view(td, i)
		assert.Equal(t, "custom-agent", o.TraceName)
		assert.Equal(t, "alice", o.UserID)
		assert.Equal(t, []string{"team:a"}, o.Tags)
	}
	assert.Equal(t, "chain", view(td, 1).Type)
}

func TestRootNames(t *testing.T) {
	td := twoSpanTrace(func(root, _ ptrace.Span) {
		root.Attributes().PutStr(genai.AttrAgentName, "custom-agent")
	})
	Traces(td)
	assert.Equal(t, "custom-agent", view(td, 1).TraceName)

	td = twoSpanTrace(func(root, _ ptrace.Span) {
		root.Attributes().Remove(genai.AttrOperationName)
		root.SetName("POST /runs")
	})
	Traces(td)
	assert.Equal(t, "POST /runs", view(td, 1).TraceName)

	// no root in the batch: no invented name
	td = twoSpanTrace(func(root, _ ptrace.Span) { root.SetParentSpanID([8]byte{9}) })
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(s ptrace.Span) bool { return s.SpanID() == [8]byte{1} })
	Traces(td)
	_, has := spanAt(td, 0).Attributes().Get(AttrTraceName)
	assert.False(t, has)
}

func TestSubagentUsageGoesToMetadata(t *testing.T) {
	td := twoSpanTrace(func(_, chat ptrace.Span) {
		a := chat.Attributes()
		a.PutStr(genai.AttrCaller, genai.LeadAgentName)
		genai.PutSubagentUsage(a, genai.Usage{Input: 500, Output: 50, CacheRead: 100})
		a.PutInt(genai.AttrSubagentDispatches, 2)
		genai.PutStrings(a, genai.AttrSubagentToolCallIDs, []string{"c1", "c2"})
	})
	Traces(td)
	a := spanAt(td, 1).Attributes()
	assert.Equal(t, `{"input":10,"output":5,"total":15}`, get(t, spanAt(td, 1), AttrObservationUsage), "usage stays own usage")
	for key, want := range map[string]int64{
		MetaSubagentInput: 500, MetaSubagentOutput: 50, MetaSubagentTotal: 550,
		MetaSubagentCacheRead: 100, MetaSubagentCacheCreation: 0, MetaSubagentReasoning: 0, MetaSubagentDispatches: 2,
	} {
		v, ok := a.Get(key)
		require.True(t, ok, key)
		assert.Equal(t, want, v.Int(), key)
	}
	assert.Equal(t, []string{"c1", "c2"}, genai.StringsFromMap(a, MetaSubagentToolCallIDs))
	assert.Equal(t, "lead_agent", get(t, spanAt(td, 1), MetaCaller))
}

// A retried or re-queued batch is shaped again: the result must not change.
func TestIdempotent(t *testing.T) {
	td := twoSpanTrace(func(_, chat ptrace.Span) {
		chat.Attributes().PutStr(genai.AttrCaller, genai.SubagentCaller("research"))
		genai.PutSubagentUsage(chat.Attributes(), genai.Usage{Input: 1, Output: 2})
	})
	Traces(td)
	once := ptrace.NewTraces()
	td.CopyTo(once)
	Traces(td)
	vendortest.SameBytes(t, once, td)
}

func BenchmarkTraces(b *testing.B) {
	src := twoSpanTrace(func(_, chat ptrace.Span) {
		chat.Attributes().PutStr(genai.AttrCaller, genai.LeadAgentName)
	})
	td := ptrace.NewTraces()
	b.ReportAllocs()
	for b.Loop() {
		src.CopyTo(td)
		Traces(td)
	}
}

// DeerFlow's test_tracing_metadata.py: no env and no model → no tags key; no thread → no
// session, user still set.
func TestDeerFlowMetadataEdgeCases(t *testing.T) {
	td := twoSpanTrace(func(root, chat ptrace.Span) {
		chat.Attributes().Remove(genai.AttrRequestModel)
		chat.Attributes().Remove(genai.AttrConversationID)
	})
	td.ResourceSpans().At(0).Resource().Attributes().Clear()
	Traces(td)
	for i := 0; i < 2; i++ {
		a := spanAt(td, i).Attributes()
		_, hasTags := a.Get(AttrTraceTags)
		assert.False(t, hasTags)
		_, hasSession := a.Get(AttrSessionID)
		assert.False(t, hasSession)
		assert.Equal(t, "default", view(td, i).UserID)
		assert.Equal(t, "lead-agent", view(td, i).TraceName)
	}
}
