package middleware

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

func withFinish(m message.Message, key, v string) message.Message {
	m.ResponseMetadata = map[string]any{key: v}
	return m
}

func TestSafetyTriggers(t *testing.T) {
	s := NewSafetyFinishReasonMiddleware(DefaultSafetyFinishReasonConfig())
	ctx := context.Background()
	calls := withFinish(aiMsg("a", "", call("c1", "write_file", map[string]any{"path": "x", "content": "secret"}), call("c2", "bash", nil)), "finish_reason", "content_filter")
	calls.AdditionalKwargs = map[string]any{"tool_calls": []any{map[string]any{"id": "c1"}}, "function_call": map[string]any{}, "other": "kept"}
	rt := testRuntime()
	j := journal.New(journal.Options{RunID: "run-1"})
	rt.Journal = j
	var events []string
	rt.Emit = func(e string, _ map[string]any) { events = append(events, e) }
	u, err := s.AfterModel(ctx, rt, st(human("h", "q"), calls))
	require.NoError(t, err)
	got := u.Messages[0]
	assert.Equal(t, "a", got.ID, "same id: replaced in place")
	assert.Empty(t, got.ToolCalls)
	assert.NotContains(t, got.AdditionalKwargs, "tool_calls")
	assert.NotContains(t, got.AdditionalKwargs, "function_call")
	assert.Equal(t, "kept", got.AdditionalKwargs["other"])
	assert.Equal(t, "content_filter", finishReason(got), "provider finish reason kept")
	rec := got.AdditionalKwargs[KwargSafetyTermination].(map[string]any)
	assert.Equal(t, "openai_compatible_content_filter", rec["detector"])
	assert.Equal(t, "finish_reason", rec["reason_field"])
	assert.Equal(t, "content_filter", rec["reason_value"])
	assert.Equal(t, 2, rec["suppressed_tool_call_count"])
	assert.Contains(t, got.Content, "suppressed")
	assert.Equal(t, agent.StopSafetyCapped, rt.Context.StopReason())
	assert.Equal(t, []string{"safety_termination"}, events)
	var found bool
	for _, e := range j.Events() {
		if e.Type == "middleware:safety_termination" {
			found = true
			assert.NotContains(t, e.Content.(map[string]any)["changes"], "secret", "never tool arguments")
		}
	}
	assert.True(t, found)
	again, _ := s.AfterModel(ctx, rt, st(got))
	assert.Nil(t, again, "idempotent")

	text := withFinish(aiMsg("a", "visible text"), "finish_reason", "content_filter")
	u, _ = s.AfterModel(ctx, testRuntime(), st(text))
	assert.Nil(t, u, "text without tool calls untouched")
	blank := withFinish(aiMsg("a", "  "), "finish_reason", "CONTENT_FILTER")
	u, _ = s.AfterModel(ctx, testRuntime(), st(blank))
	require.NotNil(t, u)
	assert.Contains(t, u.Messages[0].Content, "returned no content")
	refusal := withFinish(aiMsg("a", ""), "stop_reason", "refusal")
	u, _ = s.AfterModel(ctx, testRuntime(), st(refusal))
	require.NotNil(t, u)
	gem := withFinish(aiMsg("a", "", call("c", "ls", nil)), "finish_reason", "SAFETY")
	u, _ = s.AfterModel(ctx, testRuntime(), st(gem))
	require.NotNil(t, u)
	for _, ok := range []message.Message{aiMsg("a", ""), aiMsg("a", "", call("c", "ls", nil)), withFinish(aiMsg("a", "", call("c", "ls", nil)), "finish_reason", "STOP")} {
		u, _ = s.AfterModel(ctx, testRuntime(), st(ok))
		assert.Nil(t, u)
	}
	u, _ = s.AfterModel(ctx, testRuntime(), st())
	assert.Nil(t, u)
	u, _ = s.AfterModel(ctx, testRuntime(), st(human("h", "q")))
	assert.Nil(t, u)
	extra := NewSafetyFinishReasonMiddleware(SafetyFinishReasonConfig{Enabled: true, ExtraFinishReasons: []string{"sensitive"}})
	u, _ = extra.AfterModel(ctx, testRuntime(), st(withFinish(aiMsg("a", ""), "finish_reason", "sensitive")))
	assert.NotNil(t, u)
	// additional_kwargs fallback.
	kw := aiMsg("a", "")
	kw.ResponseMetadata = nil
	kw.AdditionalKwargs = map[string]any{"finish_reason": "content_filter"}
	u, _ = s.AfterModel(ctx, testRuntime(), st(kw))
	assert.NotNil(t, u)
}

type panicDetector struct{}

func (panicDetector) Name() string { return "buggy" }
func (panicDetector) Detect(message.Message) (SafetyDetection, bool) {
	panic("boom")
}

func TestSafetyBuggyDetectorSkipped(t *testing.T) {
	s := &SafetyFinishReasonMiddleware{detectors: append([]SafetyDetector{panicDetector{}}, DefaultSafetyDetectors()...)}
	u, err := s.AfterModel(context.Background(), testRuntime(), st(withFinish(aiMsg("a", ""), "finish_reason", "content_filter")))
	require.NoError(t, err)
	assert.NotNil(t, u)
}

// A safety-terminated response with tool calls never trips loop detection and its tool
// calls never execute, because Safety is registered after LoopDetection (reverse dispatch).
func TestSafetyBeforeLoopDetection(t *testing.T) {
	loop := loopMW(t, func(c *LoopDetectionConfig) { c.WarnThreshold, c.HardLimit = 1, 1 })
	safety := NewSafetyFinishReasonMiddleware(DefaultSafetyFinishReasonConfig())
	executed := 0
	counter := countingTool{n: &executed}
	p := &scriptedProvider{turns: []func(*model.Request) (*model.Response, error){
		reply(withFinish(aiMsg("", "", call("c1", "count", nil)), "finish_reason", "content_filter")),
	}}
	res := runAgent(t, p, []agent.Middleware{loop, safety}, "go", counter)
	assert.Zero(t, executed, "truncated tool call never executed")
	assert.Equal(t, agent.StopSafetyCapped, res.StopReason, "loop detection never saw the call (no loop_capped)")
	assert.Empty(t, loop.Pending("thread-1", "run-1"))
	assert.Equal(t, 0, loop.TrackedThreads(), "no tool calls reached loop accounting")

	// Wrong order (Safety first in the list => runs last): loop detection trips on the
	// truncated call first, and the assembly check rejects that chain.
	loop2 := loopMW(t, func(c *LoopDetectionConfig) { c.WarnThreshold, c.HardLimit = 1, 1 })
	p2 := &scriptedProvider{turns: p.turns}
	res2 := runAgent(t, p2, []agent.Middleware{NewSafetyFinishReasonMiddleware(DefaultSafetyFinishReasonConfig()), loop2}, "go", counter)
	assert.Equal(t, agent.StopLoopCapped, res2.StopReason, "the misordered chain misreports a loop")
	assert.Error(t, AssertOrdering([]agent.Middleware{NewSafetyFinishReasonMiddleware(DefaultSafetyFinishReasonConfig()), loop2}))
}

type countingTool struct{ n *int }

func (countingTool) Spec() tool.Spec {
	return tool.Spec{Name: "count", Description: "count", Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}
}

func (c countingTool) Call(context.Context, tool.Call) (tool.Result, error) {
	*c.n++
	return tool.Result{Content: "counted"}, nil
}
