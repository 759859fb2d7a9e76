package journal

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/message"
)

func ai(content string, in, out, total int64, model string) message.Message {
	m := message.AI(content)
	m.UsageMetadata = &message.UsageMetadata{InputTokens: in, OutputTokens: out, TotalTokens: total}
	if model != "" {
		m.ResponseMetadata = map[string]any{message.MetaModelName: model}
	}
	return m
}

func end(j *RunJournal, id, caller string, msgs ...message.Message) {
	j.OnLLMEnd(id, caller, msgs, 5*time.Millisecond)
}

func off() *bool { f := false; return &f }

// DeerFlow's test_run_journal.py: test_token_accumulation /
// test_total_tokens_computed_from_input_output
func TestTokenAccumulation(t *testing.T) {
	j := New(Options{})
	end(j, "r1", "", ai("a", 10, 5, 15, ""))
	end(j, "r2", "", ai("b", 20, 10, 30, ""))
	d := j.CompletionData()
	assert.Equal(t, int64(30), d.TotalInputTokens)
	assert.Equal(t, int64(15), d.TotalOutputTokens)
	assert.Equal(t, int64(45), d.TotalTokens)
	assert.Equal(t, int64(2), d.LLMCallCount)

	j = New(Options{})
	end(j, "r1", "", ai("a", 100, 50, 0, ""))
	assert.Equal(t, int64(150), j.CompletionData().TotalTokens)
}

// test_run_journal.py: caller classification and bucketing; test_token_usage_by_model.py:
// per-model buckets.
func TestCallerBucketsAndModels(t *testing.T) {
	j := New(Options{})
	end(j, "r1", "lead_agent", ai("x", 10, 5, 15, "lead-model"))
	end(j, "r2", "subagent:research", ai("x", 10, 5, 15, "sub-model"))
	end(j, "r3", "middleware:title", ai("x", 4, 1, 5, "title-model"))
	end(j, "r4", "something:else", ai("x", 7, 3, 10, ""))
	d := j.CompletionData()
	assert.Equal(t, int64(25), d.LeadAgentTokens, "unknown tag buckets as lead agent")
	assert.Equal(t, int64(15), d.SubagentTokens)
	assert.Equal(t, int64(5), d.MiddlewareTokens)
	assert.Equal(t, int64(45), d.TotalTokens)
	assert.Equal(t, int64(4), d.LLMCallCount)
	assert.Equal(t, map[string]ModelUsage{
		"lead-model": {InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CacheReadTokens: 0}, "sub-model": {InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CacheReadTokens: 0}, "title-model": {InputTokens: 4, OutputTokens: 1, TotalTokens: 5, CacheReadTokens: 0}, "unknown": {InputTokens: 7, OutputTokens: 3, TotalTokens: 10, CacheReadTokens: 0},
	}, d.TokenUsageByModel)
	assertInvariants(t, d)
}

func assertInvariants(t *testing.T, d CompletionData) {
	t.Helper()
	var sum int64
	for _, b := range d.TokenUsageByModel {
		sum += b.TotalTokens
	}
	assert.Equal(t, d.TotalTokens, sum, "by-model sum == total")
	assert.Equal(t, d.TotalTokens, d.LeadAgentTokens+d.SubagentTokens+d.MiddlewareTokens, "buckets sum == total")
}

// test_token_usage_by_model.py: model fallback ("model" key) and aggregation across calls.
func TestModelNameFallbackAndAggregation(t *testing.T) {
	j := New(Options{})
	m := ai("x", 7, 3, 10, "")
	m.ResponseMetadata = map[string]any{message.MetaModel: "provider-model"}
	end(j, "r1", "", m)
	m2 := ai("x", 7, 3, 10, "")
	m2.ResponseMetadata = map[string]any{message.MetaModel: "provider-model"}
	end(j, "r2", "", m2)
	assert.Equal(t, ModelUsage{InputTokens: 14, OutputTokens: 6, TotalTokens: 20, CacheReadTokens: 0}, j.CompletionData().TokenUsageByModel["provider-model"])
}

// test_run_journal.py: dedupe by run id; first callback without usage does not block the
// second.
func TestDedupeByCallID(t *testing.T) {
	j := New(Options{})
	end(j, "r1", "", ai("Answer", 10, 5, 15, "m"))
	end(j, "r1", "", ai("Answer", 10, 5, 15, "m"))
	d := j.CompletionData()
	assert.Equal(t, int64(15), d.TotalTokens)
	assert.Equal(t, int64(1), d.LLMCallCount)
	assert.Equal(t, int64(15), d.TokenUsageByModel["m"].TotalTokens)

	j = New(Options{})
	noUsage := message.AI("Answer")
	end(j, "r1", "", noUsage)
	end(j, "r1", "", ai("Answer", 10, 5, 15, ""))
	d = j.CompletionData()
	assert.Equal(t, int64(15), d.TotalTokens)
	assert.Equal(t, int64(1), d.MessageCount, "duplicate run id does not double count the summary")
	assert.Len(t, j.Events(), 2, "the event is still emitted for the duplicate")
}

// test_run_journal.py: test_usage_metadata_none_no_crash / zero usage ignored / tracking disabled.
func TestNoUsageZeroUsageAndTrackingOff(t *testing.T) {
	j := New(Options{})
	end(j, "r1", "", message.AI("x"))
	end(j, "r2", "", ai("x", 0, 0, 0, "m"))
	d := j.CompletionData()
	assert.Zero(t, d.TotalTokens)
	assert.Zero(t, d.LLMCallCount)
	assert.Empty(t, d.TokenUsageByModel)

	j = New(Options{TrackTokenUsage: off()})
	end(j, "r1", "subagent:x", ai("x", 10, 5, 15, "m"))
	j.RecordExternalLLMUsageRecords([]UsageRecord{{SourceRunID: "s", Caller: "subagent:x", InputTokens: 1, OutputTokens: 1}})
	d = j.CompletionData()
	assert.Zero(t, d.TotalTokens)
	assert.Zero(t, d.LLMCallCount)
	assert.Zero(t, d.SubagentTokens)
	assert.Empty(t, d.TokenUsageByModel)
	assert.Len(t, j.Events(), 1, "events still recorded")
}

// test_run_journal.py: TestExternalUsageRecords; test_token_usage_by_model.py: external
// records and cache read.
func TestExternalRecords(t *testing.T) {
	j := New(Options{})
	end(j, "r1", "", ai("x", 10, 5, 15, "lead-model"))
	j.RecordExternalLLMUsageRecords([]UsageRecord{
		{SourceRunID: "s1", Caller: "subagent:research", ModelName: "sub-model", InputTokens: 100, OutputTokens: 50, TotalTokens: 150, CacheReadTokens: 25},
		{SourceRunID: "s1", Caller: "subagent:research", ModelName: "sub-model", InputTokens: 100, OutputTokens: 50, TotalTokens: 150},
		{SourceRunID: "", Caller: "subagent:research", InputTokens: 1, OutputTokens: 1, TotalTokens: 2},
		{SourceRunID: "s2", Caller: "middleware:summarize", InputTokens: 200, OutputTokens: 100, TotalTokens: 0},
		{SourceRunID: "s3", Caller: "subagent:research", InputTokens: 0, OutputTokens: 0, TotalTokens: 0},
		{SourceRunID: "s4", Caller: "", InputTokens: 10, OutputTokens: 5, TotalTokens: 15},
	})
	d := j.CompletionData()
	assert.Equal(t, int64(150), d.SubagentTokens)
	assert.Equal(t, int64(300), d.MiddlewareTokens, "total computed from input+output")
	assert.Equal(t, int64(30), d.LeadAgentTokens, "absent caller buckets as lead agent")
	assert.Equal(t, int64(480), d.TotalTokens)
	assert.Equal(t, int64(1), d.LLMCallCount, "external records do not count as calls")
	assert.Equal(t, ModelUsage{InputTokens: 100, OutputTokens: 50, TotalTokens: 150, CacheReadTokens: 25}, d.TokenUsageByModel["sub-model"])
	assert.Equal(t, ModelUsage{InputTokens: 210, OutputTokens: 105, TotalTokens: 315, CacheReadTokens: 0}, d.TokenUsageByModel["unknown"])
	assertInvariants(t, d)
}

// test_token_usage_by_model.py: cache read is a sparse key accumulated per model.
func TestCacheReadSparse(t *testing.T) {
	j := New(Options{})
	m := ai("x", 100, 10, 110, "m")
	m.UsageMetadata.InputTokenDetails = &message.InputTokenDetails{CacheRead: 80}
	end(j, "r1", "", m)
	end(j, "r2", "", ai("x", 50, 5, 55, "m"))
	assert.Equal(t, ModelUsage{InputTokens: 150, OutputTokens: 15, TotalTokens: 165, CacheReadTokens: 80}, j.CompletionData().TokenUsageByModel["m"])
	end(j, "r3", "", ai("x", 1, 1, 2, "n"))
	assert.Equal(t, ModelUsage{InputTokens: 1, OutputTokens: 1, TotalTokens: 2, CacheReadTokens: 0}, j.CompletionData().TokenUsageByModel["n"])
}

// test_run_journal.py: TestConvenienceFields.
func TestMessageSummary(t *testing.T) {
	j := New(Options{})
	j.OnHumanInput(message.Human("Question"))
	end(j, "r1", "", message.AI("Useful answer"))
	end(j, "r2", "", message.AI("", message.ToolCall{ID: "c1", Name: "bash"}))
	j.OnToolEnd(message.Tool("c1", "bash", "ok", ""))
	end(j, "r3", "subagent:x", message.AI("subagent text"))
	end(j, "r4", "middleware:title", message.AI("title text"))
	d := j.CompletionData()
	assert.Equal(t, int64(6), d.MessageCount)
	assert.Equal(t, "Question", d.FirstHumanMessage)
	assert.Equal(t, "Useful answer", d.LastAIMessage, "tool-call-only, subagent and middleware messages never overwrite it")

	long := make([]rune, 2500)
	for i := range long {
		long[i] = 'é'
	}
	end(j, "r5", "", message.AI(string(long)))
	assert.Len(t, []rune(j.CompletionData().LastAIMessage), MaxLastAIMessage)
}

func TestIdentifyCaller(t *testing.T) {
	assert.Equal(t, "lead_agent", IdentifyCaller([]string{"lead_agent"}))
	assert.Equal(t, "subagent:research", IdentifyCaller([]string{"x", "subagent:research"}))
	assert.Equal(t, "middleware:summarization", IdentifyCaller([]string{"middleware:summarization", "subagent:y"}))
	assert.Equal(t, "lead_agent", IdentifyCaller(nil))
	assert.Equal(t, "lead_agent", IdentifyCaller([]string{"other"}))
}

func TestEventsAndErrorFallback(t *testing.T) {
	j := New(Options{RunID: "run-1", ThreadID: "t-1"})
	j.RecordMiddleware("title", "TitleMiddleware", "after_model", "set_title", map[string]any{"title": "x"})
	j.RecordMemoryContext("memory")
	j.RecordMemoryContext("memory")
	fb := message.AI("provider down").WithKwarg(message.KwargErrorFallback, true).WithKwarg("error_detail", "HTTP 503")
	end(j, "r1", "", fb)
	ev := j.Events()
	require.Len(t, ev, 3)
	assert.Equal(t, "middleware:title", ev[0].Type)
	assert.Equal(t, "middleware", ev[0].Category)
	assert.Equal(t, map[string]any{"name": "TitleMiddleware", "hook": "after_model", "action": "set_title", "changes": map[string]any{"title": "x"}}, ev[0].Content)
	assert.Equal(t, "context:memory", ev[1].Type)
	assert.Equal(t, "llm.ai.response", ev[2].Type)
	assert.Equal(t, "message", ev[2].Category)
	assert.NotNil(t, ev[2].Metadata["latency_ms"])
	detail, ok := j.ErrorFallback()
	assert.True(t, ok)
	assert.Equal(t, "HTTP 503", detail)
}

// test_run_journal.py: TestProgressSnapshots.
func TestProgressSnapshots(t *testing.T) {
	var mu sync.Mutex
	var got []CompletionData
	report := func(d CompletionData) { mu.Lock(); got = append(got, d); mu.Unlock() }
	snap := func() []CompletionData { mu.Lock(); defer mu.Unlock(); return append([]CompletionData(nil), got...) }

	j := New(Options{ProgressReporter: report})
	end(j, "r1", "", ai("Answer", 10, 5, 15, ""))
	s := snap()
	require.Len(t, s, 1)
	assert.Equal(t, int64(15), s[0].TotalTokens)
	assert.Equal(t, int64(1), s[0].LLMCallCount)
	assert.Equal(t, int64(1), s[0].MessageCount)
	assert.Equal(t, "Answer", s[0].LastAIMessage)

	got = nil
	j = New(Options{ProgressReporter: report, ProgressInterval: 300 * time.Millisecond})
	end(j, "r1", "", ai("First", 10, 5, 15, ""))
	end(j, "r2", "", ai("Second", 20, 10, 30, ""))
	require.Len(t, snap(), 1, "second update inside the window is delayed")
	require.Eventually(t, func() bool { return len(snap()) == 2 }, 5*time.Second, 5*time.Millisecond)
	last := snap()[1]
	assert.Equal(t, int64(45), last.TotalTokens)
	assert.Equal(t, int64(2), last.LLMCallCount)
	assert.Equal(t, "Second", last.LastAIMessage)

	got = nil
	j = New(Options{ProgressReporter: report, ProgressInterval: time.Hour})
	end(j, "r1", "", ai("First", 10, 5, 15, ""))
	end(j, "r2", "", ai("Second", 20, 10, 30, ""))
	j.Flush()
	time.Sleep(20 * time.Millisecond)
	s = snap()
	require.Len(t, s, 1, "flush cancels the delayed snapshot without writing")
	assert.Equal(t, int64(15), s[0].TotalTokens)
}

func TestConcurrentUse(t *testing.T) {
	j := New(Options{})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(2)
		go func() { defer wg.Done(); end(j, string(rune('a'+i%26))+"x", "subagent:x", ai("x", 1, 1, 2, "m")) }()
		go func() {
			defer wg.Done()
			j.RecordExternalLLMUsageRecords([]UsageRecord{{SourceRunID: "s", Caller: "subagent:y", InputTokens: 1, OutputTokens: 1}})
		}()
	}
	wg.Wait()
	d := j.CompletionData()
	assert.Equal(t, int64(26*2+2), d.TotalTokens)
	assertInvariants(t, d)
}

type valueError struct{}

func (valueError) Error() string { return "bad value" }

// test_run_journal.py: test_on_chain_error_writes_run_error, test_on_llm_end_with_tool_calls_produces_ai_tool_call,
// test_on_llm_end_subagent_no_ai_message, test_middleware_tag_variants.
func TestLifecycleAndToolCallEvents(t *testing.T) {
	j := New(Options{})
	j.OnRunStart("lead_agent")
	tc := message.AI("", message.ToolCall{ID: "call_1", Name: "bash", Args: map[string]any{"command": "ls"}})
	end(j, "r1", "", tc)
	end(j, "r2", "subagent:research", message.AI("sub text"))
	j.RecordMiddleware("title", "TitleMiddleware", "after_model", "set", nil)
	j.RecordMiddleware("summarize", "SummarizationMiddleware", "before_model", "compact", nil)
	j.OnRunError(valueError{})
	ev := j.Events()
	require.Len(t, ev, 6)
	assert.Equal(t, "run.start", ev[0].Type)
	got := ev[1].Content.(message.Message)
	assert.Equal(t, []message.ToolCall{{ID: "call_1", Name: "bash", Args: map[string]any{"command": "ls"}}}, got.ToolCalls, "tool calls preserved in the event")
	assert.Equal(t, "llm.ai.response", ev[2].Type, "subagent responses still produce an event")
	assert.Equal(t, "subagent:research", ev[2].Metadata["caller"])
	assert.Equal(t, []string{"middleware:title", "middleware:summarize"}, []string{ev[3].Type, ev[4].Type})
	assert.Equal(t, "run.error", ev[5].Type)
	assert.Equal(t, "bad value", ev[5].Content)
	assert.Equal(t, "journal.valueError", ev[5].Metadata["error_type"])
	assert.Equal(t, int64(2), j.CompletionData().MessageCount)
}
