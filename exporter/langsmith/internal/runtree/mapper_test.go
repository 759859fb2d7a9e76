package runtree

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/agentmeter/agentmeter/internal/dottedorder"
	"github.com/agentmeter/agentmeter/internal/fakevendor"
)

var base = time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)

func byName(runs []Run) map[string]Run {
	m := map[string]Run{}
	for _, r := range runs {
		m[r.Head.Name] = r
	}
	return m
}

func encodeRun(t *testing.T, r Run) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, part := range []any{r.Head, map[string]any{"inputs": r.Inputs, "outputs": r.Outputs, "extra": r.Extra}} {
		b, err := json.Marshal(part)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &out))
	}
	if r.Error != "" {
		out["error"] = r.Error
	}
	return out
}

func TestMapAgentTrace(t *testing.T) {
	td, ids := fakevendor.AgentTrace(1, base)
	m := NewMapper("proj", 1000)
	runs, skipped := m.Map(td)
	require.Zero(t, skipped)
	require.Len(t, runs, 8)
	for _, r := range runs {
		assert.Empty(t, fakevendor.CheckLangSmithRun(encodeRun(t, r)), r.Head.Name)
	}
	traceUUID := dottedorder.TraceUUID(td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).TraceID())
	rs := byName(runs)

	lead := rs["invoke_agent lead_agent"]
	assert.Equal(t, traceUUID, lead.Head.ID, "root run id is the trace id")
	assert.Equal(t, traceUUID, lead.Head.TraceID)
	assert.Empty(t, lead.Head.ParentRunID)
	assert.Equal(t, "20260304T050607123456Z"+traceUUID, lead.Head.DottedOrder)
	assert.Equal(t, TypeChain, lead.Head.RunType)
	assert.Equal(t, "proj", lead.Head.SessionName)
	assert.Nil(t, lead.Outputs.UsageMetadata)

	chat := rs["chat gpt-4o"]
	assert.Equal(t, TypeLLM, chat.Head.RunType)
	assert.Equal(t, dottedorder.SpanUUID(ids.LeadChat), chat.Head.ID)
	assert.Equal(t, traceUUID, chat.Head.ParentRunID)
	assert.Equal(t, lead.Head.DottedOrder+".20260304T050607133456Z"+dottedorder.SpanUUID(ids.LeadChat), chat.Head.DottedOrder)
	assert.Equal(t, &UsageMetadata{InputTokens: 1200, OutputTokens: 300, TotalTokens: 1500,
		CacheRead: 200, CacheCreation: 100, Reasoning: 50}, chat.Outputs.UsageMetadata,
		"own usage only, inclusive; the merged subagent usage is not added")
	md := meta(t, chat)
	assert.Equal(t, "openai", md["ls_provider"])
	assert.Equal(t, "gpt-4o", md["ls_model_name"])
	assert.Equal(t, "lead_agent", md["caller"])
	assert.Equal(t, map[string]any{
		"usage":      map[string]any{"input_tokens": 500.0, "output_tokens": 80.0, "total_tokens": 580.0, "input_token_details": map[string]any{"cache_read": 100.0}},
		"dispatches": 1.0, "tool_call_ids": []any{"call-task-1"},
	}, md["subagent_usage"])
	for k := range md {
		assert.False(t, strings.HasPrefix(k, "gen_ai.usage.") || strings.HasPrefix(k, "agentmeter.subagent.input"), k)
	}
	assert.Equal(t, Metadata{StrKV("model", "gpt-4o")}, chat.Extra.InvocationParams)

	task := rs["execute_tool task"]
	assert.Equal(t, TypeTool, task.Head.RunType)
	assert.Equal(t, Metadata{StrKV("tool_name", "task")}, task.Extra.InvocationParams)
	researcher := rs["invoke_agent researcher"]
	assert.Equal(t, dottedorder.SpanUUID(ids.Task), researcher.Head.ParentRunID)
	assert.Equal(t, []string{"subagent:researcher"}, researcher.Head.Tags)
	assert.Equal(t, "subagent", meta(t, researcher)["caller_bucket"])
	assert.Equal(t, 2, strings.Count(researcher.Head.DottedOrder, "."), "root.task.researcher")

	search := rs["execute_tool web_search"]
	assert.Equal(t, StatusError, search.Head.Status)
	assert.Equal(t, "search backend timed out", search.Error)
	assert.Equal(t, StatusSuccess, researcher.Head.Status)

	for _, r := range runs {
		assert.Equal(t, "thread-42", meta(t, r)["thread_id"], r.Head.Name)
		assert.Equal(t, "thread-42", meta(t, r)["session_id"], r.Head.Name)
		assert.Equal(t, traceUUID, r.Head.TraceID)
		if r.Head.RunType != TypeLLM {
			assert.Nil(t, r.Outputs.UsageMetadata, r.Head.Name)
		}
	}
}

// Children before parents in the batch, and parents in an earlier batch: same chains.
func TestChainsAcrossBatches(t *testing.T) {
	td, _ := fakevendor.AgentTrace(2, base)
	want := map[string]Head{}
	wholeRuns, _ := NewMapper("p", 1000).Map(td)
	for _, r := range wholeRuns {
		want[r.Head.ID] = r.Head
	}

	// reverse order inside one batch
	rev := ptrace.NewTraces()
	td.ResourceSpans().CopyTo(rev.ResourceSpans())
	spans := rev.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	n := spans.Len()
	for i := 0; i < n/2; i++ {
		a, b := ptrace.NewSpan(), ptrace.NewSpan()
		spans.At(i).CopyTo(a)
		spans.At(n - 1 - i).CopyTo(b)
		b.CopyTo(spans.At(i))
		a.CopyTo(spans.At(n - 1 - i))
	}
	revRuns, _ := NewMapper("p", 1000).Map(rev)
	for _, r := range revRuns {
		assert.Equal(t, want[r.Head.ID], r.Head)
	}

	// one span per batch, children first is impossible across batches without the
	// parent; parents first (the collector's usual order) must give identical heads
	m := NewMapper("p", 1000)
	for i := 0; i < n; i++ {
		one := ptrace.NewTraces()
		td.ResourceSpans().At(0).Resource().CopyTo(one.ResourceSpans().AppendEmpty().Resource())
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(i).CopyTo(one.ResourceSpans().At(0).ScopeSpans().AppendEmpty().Spans().AppendEmpty())
		runs, _ := m.Map(one)
		require.Len(t, runs, 1)
		assert.Equal(t, want[runs[0].Head.ID], runs[0].Head)
		assert.NotContains(t, meta(t, runs[0]), "orphan")
	}
	assert.Equal(t, n, m.CachedSpans())

	// every span again (re-emissions, patched onto the runs), children first: each is
	// rebuilt from the cache where its run already is
	again, _ := m.Map(rev)
	require.Len(t, again, n)
	for _, r := range again {
		assert.Equal(t, want[r.Head.ID], r.Head)
	}
}

func singleSpan(td ptrace.Traces, i int) ptrace.Traces {
	one := ptrace.NewTraces()
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(i).CopyTo(one.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
	return one
}

func TestOrphans(t *testing.T) {
	td, ids := fakevendor.AgentTrace(3, base)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	idx := map[pcommon.SpanID]int{}
	for i := 0; i < spans.Len(); i++ {
		idx[spans.At(i).SpanID()] = i
	}
	m := NewMapper("p", 1000)

	// the subagent's model call arrives first: parent unknown, no root yet -> re-rooted
	runs, _ := m.Map(singleSpan(td, idx[ids.SubChat1]))
	r := runs[0]
	assert.Equal(t, OrphanRerooted, meta(t, r)["orphan"])
	assert.Equal(t, dottedorder.SpanUUID(ids.SubChat1), r.Head.ID)
	assert.Equal(t, r.Head.ID, r.Head.TraceID, "a re-rooted orphan is the root of its own LangSmith trace")
	assert.Empty(t, r.Head.ParentRunID)
	assert.Empty(t, fakevendor.CheckLangSmithRun(encodeRun(t, r)))

	// another orphan of the same trace hangs under that root
	runs, _ = m.Map(singleSpan(td, idx[ids.SubChat2]))
	r2 := runs[0]
	assert.Equal(t, OrphanAttachedToRoot, meta(t, r2)["orphan"])
	assert.Equal(t, r.Head.ID, r2.Head.ParentRunID)
	assert.Equal(t, r.Head.ID, r2.Head.TraceID)
	assert.True(t, strings.HasPrefix(r2.Head.DottedOrder, r.Head.DottedOrder+"."))
	assert.Empty(t, fakevendor.CheckLangSmithRun(encodeRun(t, r2)))

	// the true root arrives later: it still gets the trace UUID, never colliding
	runs, _ = m.Map(singleSpan(td, idx[ids.Lead]))
	assert.Equal(t, dottedorder.TraceUUID(spans.At(0).TraceID()), runs[0].Head.ID)
	assert.NotContains(t, meta(t, runs[0]), "orphan")
	// and later orphans attach to the true root
	runs, _ = m.Map(singleSpan(td, idx[ids.SearchTool]))
	assert.Equal(t, dottedorder.TraceUUID(spans.At(0).TraceID()), runs[0].Head.ParentRunID)
	assert.Equal(t, OrphanAttachedToRoot, meta(t, runs[0])["orphan"])
	assert.Equal(t, "b00300000000000"+"4", meta(t, runs[0])["otel.parent_span_id"])
}

func TestParentCycleDoesNotHang(t *testing.T) {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	a, b := ss.Spans().AppendEmpty(), ss.Spans().AppendEmpty()
	tid := pcommon.TraceID{9}
	a.SetTraceID(tid)
	b.SetTraceID(tid)
	a.SetSpanID(pcommon.SpanID{1})
	b.SetSpanID(pcommon.SpanID{2})
	a.SetParentSpanID(pcommon.SpanID{2})
	b.SetParentSpanID(pcommon.SpanID{1})
	runs, _ := NewMapper("p", 10).Map(td)
	require.Len(t, runs, 2)
	for _, r := range runs {
		assert.Empty(t, fakevendor.CheckLangSmithRun(encodeRun(t, r)))
	}
}

func TestInvalidIDsAreSkipped(t *testing.T) {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Spans().AppendEmpty().SetSpanID(pcommon.SpanID{1}) // no trace id
	runs, skipped := NewMapper("p", 10).Map(td)
	assert.Empty(t, runs)
	assert.Equal(t, 1, skipped)
}

func TestCacheIsBounded(t *testing.T) {
	m := NewMapper("p", 20)
	for seed := byte(0); seed < 10; seed++ {
		td, _ := fakevendor.AgentTrace(seed, base)
		m.Map(td)
		assert.LessOrEqual(t, m.CachedSpans(), 20)
	}
	none := NewMapper("p", 0)
	td, _ := fakevendor.AgentTrace(1, base)
	runs, _ := none.Map(td)
	assert.Len(t, runs, 8)
	assert.Zero(t, none.CachedSpans())
}

// A child starting before its parent (clock skew) gets a clamped segment, never one
// going back in time; its start_time stays the real one.
func TestChildSegmentClamped(t *testing.T) {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	p, c := ss.Spans().AppendEmpty(), ss.Spans().AppendEmpty()
	tid := pcommon.TraceID{7}
	p.SetTraceID(tid)
	c.SetTraceID(tid)
	p.SetSpanID(pcommon.SpanID{1})
	c.SetSpanID(pcommon.SpanID{2})
	c.SetParentSpanID(pcommon.SpanID{1})
	p.SetStartTimestamp(pcommon.NewTimestampFromTime(base))
	c.SetStartTimestamp(pcommon.NewTimestampFromTime(base.Add(-time.Millisecond)))
	runs, _ := NewMapper("p", 10).Map(td)
	rs := map[string]Run{runs[0].Head.ID: runs[0], runs[1].Head.ID: runs[1]}
	child := rs[dottedorder.SpanUUID(pcommon.SpanID{2})]
	assert.Contains(t, child.Head.DottedOrder, ".20260304T050607123456Z")
	assert.Equal(t, "2026-03-04T05:06:07.122456Z", child.Head.StartTime)
	assert.Empty(t, fakevendor.CheckLangSmithRun(encodeRun(t, child)))
}

func TestContentPassThrough(t *testing.T) {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{5})
	sp.SetSpanID(pcommon.SpanID{5})
	sp.SetName("chat m")
	sp.Attributes().PutStr("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`)
	sp.Attributes().PutStr("gen_ai.output.messages", `not json`)
	runs, _ := NewMapper("p", 10).Map(td)
	r := runs[0]
	assert.Equal(t, TypeLLM, r.Head.RunType, "run type from the span name when the operation attribute is absent")
	assert.JSONEq(t, `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`, string(r.Inputs.Messages))
	assert.JSONEq(t, `"not json"`, string(r.Outputs.Messages))
	assert.NotContains(t, meta(t, r), "gen_ai.input.messages")
	assert.Nil(t, r.Outputs.UsageMetadata, "no usage attributes, no usage_metadata")
}

func TestErrorFromExceptionEvent(t *testing.T) {
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{5})
	sp.SetSpanID(pcommon.SpanID{5})
	sp.Status().SetCode(ptrace.StatusCodeError)
	ev := sp.Events().AppendEmpty()
	ev.SetName("exception")
	ev.Attributes().PutStr("exception.type", "ValueError")
	ev.Attributes().PutStr("exception.message", "bad")
	ev.Attributes().PutStr("exception.stacktrace", "at x")
	runs, _ := NewMapper("p", 10).Map(td)
	assert.Equal(t, "ValueError: bad\n\nat x", runs[0].Error)

	sp.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
	runs, _ = NewMapper("p", 10).Map(td)
	assert.Equal(t, "error", runs[0].Error, "a failed run always has error text")
}

// meta decodes a run's extra.metadata as LangSmith will see it.
func meta(t *testing.T, r Run) map[string]any {
	t.Helper()
	b, err := json.Marshal(r.Extra.Metadata)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), string(b))
	return m
}

// MapReusing maps as Map does, and a batch mapped after an earlier one's release is
// right: the memory the release handed back is cleared and cut again, not shared.
func TestMapReusingMatchesMap(t *testing.T) {
	plain, reusing := NewMapper("proj", 1000), NewMapper("proj", 1000)
	for i := range 4 {
		td, _ := fakevendor.AgentTrace(byte(i+1), base.Add(time.Duration(i)*time.Minute))
		want, _ := plain.Map(td)
		got, skipped, release := reusing.MapReusing(td)
		require.Zero(t, skipped)
		require.Len(t, got, len(want))
		for j := range want {
			assert.Equal(t, encodeRun(t, want[j]), encodeRun(t, got[j]), "batch %d run %d", i, j)
		}
		release()
	}
}
