package middleware

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

func loopMW(t *testing.T, mut func(*LoopDetectionConfig)) *LoopDetectionMiddleware {
	t.Helper()
	cfg := DefaultLoopDetectionConfig()
	if mut != nil {
		mut(&cfg)
	}
	m, err := NewLoopDetectionMiddleware(cfg)
	require.NoError(t, err)
	return m
}

func lsCall(path string) message.ToolCall { return call("c-"+path, "ls", map[string]any{"path": path}) }

func afterLoop(t *testing.T, m *LoopDetectionMiddleware, rt *agent.Runtime, calls ...message.ToolCall) *state.Update {
	t.Helper()
	u, err := m.AfterModel(context.Background(), rt, st(human("h", "q"), aiMsg(message.NewID(), "", calls...)))
	require.NoError(t, err)
	return u
}

func TestLoopDetectionConfig(t *testing.T) {
	d := DefaultLoopDetectionConfig()
	assert.True(t, d.Enabled)
	assert.Equal(t, []int{3, 5, 20, 100, 30, 50}, []int{d.WarnThreshold, d.HardLimit, d.WindowSize, d.MaxTrackedThreads, d.ToolFreqWarn, d.ToolFreqHardLimit})
	bad := d
	bad.WarnThreshold, bad.HardLimit = 0, 0
	assert.ErrorContains(t, bad.Validate(), "warn_threshold must be at least 1")
	bad = d
	bad.HardLimit = 2
	assert.ErrorContains(t, bad.Validate(), "hard_limit must be at least warn_threshold")
	bad = d
	bad.ToolFreqHardLimit = 10
	assert.ErrorContains(t, bad.Validate(), "tool_freq_hard_limit must be at least tool_freq_warn")
	bad = d
	bad.ToolFreqOverrides = map[string]ToolFreqOverride{"bash": {Warn: 0, HardLimit: 5}, "ls": {Warn: 9, HardLimit: 5}}
	err := bad.Validate()
	assert.ErrorContains(t, err, "tool_freq_overrides.bash.warn must be at least 1")
	assert.ErrorContains(t, err, "tool_freq_overrides.ls.hard_limit must be at least warn")
	ok := d
	ok.ToolFreqOverrides = map[string]ToolFreqOverride{"bash": {Warn: 150, HardLimit: 300}}
	assert.NoError(t, ok.Validate())
}

func TestHashToolCalls(t *testing.T) {
	a := call("1", "ls", map[string]any{"path": "/a"})
	b := call("2", "bash", map[string]any{"command": "echo"})
	assert.Equal(t, HashToolCalls([]message.ToolCall{a, b}), HashToolCalls([]message.ToolCall{b, a}), "order independent")
	assert.Len(t, HashToolCalls(nil), 12)
	assert.NotEqual(t, HashToolCalls([]message.ToolCall{a}), HashToolCalls([]message.ToolCall{b}))
	fwd := call("1", "read_file", map[string]any{"path": "f", "start_line": 1.0, "end_line": 450.0})
	rev := call("1", "read_file", map[string]any{"path": "f", "start_line": 450.0, "end_line": 1.0})
	assert.Equal(t, HashToolCalls([]message.ToolCall{fwd}), HashToolCalls([]message.ToolCall{rev}), "reversed range buckets match")
	for _, pair := range [][2]message.ToolCall{
		{call("1", "grep", map[string]any{"pattern": "a"}), call("1", "grep", map[string]any{"pattern": "b"})},
		{call("1", "glob", map[string]any{"glob": "*.go"}), call("1", "glob", map[string]any{"glob": "*.md"})},
		{call("1", "write_file", map[string]any{"path": "f", "content": "a"}), call("1", "write_file", map[string]any{"path": "f", "content": "b"})},
		{call("1", "str_replace", map[string]any{"path": "f", "new": "a"}), call("1", "str_replace", map[string]any{"path": "f", "new": "b"})},
	} {
		assert.NotEqual(t, HashToolCalls(pair[:1]), HashToolCalls(pair[1:]), pair[0].Name)
	}
	// Non-salient args do not change the hash of a salient-keyed tool.
	assert.Equal(t, HashToolCalls([]message.ToolCall{call("1", "bash", map[string]any{"command": "x", "description": "a"})}),
		HashToolCalls([]message.ToolCall{call("2", "bash", map[string]any{"command": "x", "description": "b"})}))
}

func TestLoopWarnQueuedThenInjectedOnce(t *testing.T) {
	m := loopMW(t, nil)
	rt := testRuntime()
	assert.Nil(t, afterLoop(t, m, rt))
	assert.Nil(t, afterLoop(t, m, rt, lsCall("/a")))
	assert.Nil(t, afterLoop(t, m, rt, lsCall("/a")))
	assert.Empty(t, m.Pending("thread-1", "run-1"), "below threshold")
	assert.Nil(t, afterLoop(t, m, rt, lsCall("/a")), "warn never mutates state")
	require.Equal(t, []string{LoopWarningMessage}, m.Pending("thread-1", "run-1"))
	assert.Nil(t, afterLoop(t, m, rt, lsCall("/a")), "warned once per hash")
	assert.Len(t, m.Pending("thread-1", "run-1"), 1)

	ai := aiMsg("a", "", lsCall("/a"))
	tm := toolMsg("t", "c-/a", "ls", "x")
	var seen []message.Message
	h := func(_ context.Context, req *agent.ModelRequest) (*agent.ModelResponse, error) {
		seen = req.Request.Messages
		return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
	}
	_, err := m.WrapModelCall(context.Background(), modelReq(rt, ai, tm), h)
	require.NoError(t, err)
	require.Len(t, seen, 3)
	assert.Equal(t, []message.Role{message.RoleAI, message.RoleTool, message.RoleHuman}, []message.Role{seen[0].Role, seen[1].Role, seen[2].Role})
	assert.Equal(t, "loop_warning", seen[2].Name)
	assert.Contains(t, seen[2].Content, "LOOP DETECTED")
	_, _ = m.WrapModelCall(context.Background(), modelReq(rt, ai, tm), h)
	assert.Len(t, seen, 2, "drained after injection")
}

func TestLoopWarningScopedByRunAndCleared(t *testing.T) {
	m := loopMW(t, func(c *LoopDetectionConfig) { c.WarnThreshold = 1 })
	a, b := testRuntime(), testRuntime()
	b.RunID = "run-2"
	afterLoop(t, m, a, lsCall("/x"))
	var seen []message.Message
	h := func(_ context.Context, req *agent.ModelRequest) (*agent.ModelResponse, error) {
		seen = req.Request.Messages
		return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
	}
	_, _ = m.WrapModelCall(context.Background(), modelReq(b, human("h", "q")), h)
	assert.Len(t, seen, 1, "run A's warning is not injected into run B")
	_, _ = m.BeforeAgent(context.Background(), b, st())
	assert.Empty(t, m.Pending("thread-1", "run-1"), "before_agent drops other runs' queues")
	afterLoop(t, m, b, lsCall("/y"))
	_, _ = m.AfterAgent(context.Background(), b, st())
	assert.Empty(t, m.Pending("thread-1", "run-2"), "after_agent drops the current run's queue")

	// Several warnings merge into one message; at most 4 newest kept, deduped.
	m2 := loopMW(t, nil)
	for i := range 6 {
		m2.queueLocked(pendingKey{"t", "r"}, fmt.Sprintf("w%d", i))
	}
	m2.queueLocked(pendingKey{"t", "r"}, "w5")
	assert.Equal(t, []string{"w2", "w3", "w4", "w5"}, m2.Pending("t", "r"))
	m3 := loopMW(t, nil)
	m3.queueLocked(pendingKey{"thread-1", "run-1"}, "first warning")
	m3.queueLocked(pendingKey{"thread-1", "run-1"}, "second warning")
	_, _ = m3.WrapModelCall(context.Background(), modelReq(testRuntime(), human("h", "q")), h)
	assert.Equal(t, "first warning\n\nsecond warning", seen[len(seen)-1].Content)
}

func TestLoopHardStopAndStopReason(t *testing.T) {
	m := loopMW(t, nil)
	rt := testRuntime()
	for range 4 {
		assert.Nil(t, afterLoop(t, m, rt, lsCall("/a")))
	}
	assert.Empty(t, rt.Context.StopReason(), "warn only does not stamp")
	u := afterLoop(t, m, rt, lsCall("/a"))
	require.NotNil(t, u)
	require.Len(t, u.Messages, 1)
	got := u.Messages[0]
	assert.Empty(t, got.ToolCalls)
	assert.Equal(t, "\n\n"+LoopHardStopMessage, got.Content)
	assert.Equal(t, "stop", finishReason(got))
	assert.Equal(t, agent.StopLoopCapped, rt.Context.StopReason())
}

func TestLoopHardStopStripsRawCalls(t *testing.T) {
	m := loopMW(t, func(c *LoopDetectionConfig) { c.WarnThreshold, c.HardLimit = 1, 1 })
	last := aiMsg("a", "existing", lsCall("/a"))
	last.AdditionalKwargs = map[string]any{"tool_calls": []any{map[string]any{"id": "c"}}, "function_call": map[string]any{}, "keep": 1}
	u, err := m.AfterModel(context.Background(), testRuntime(), st(last))
	require.NoError(t, err)
	got := u.Messages[0]
	assert.Equal(t, "existing\n\n"+LoopHardStopMessage, got.Content)
	assert.NotContains(t, got.AdditionalKwargs, "tool_calls")
	assert.NotContains(t, got.AdditionalKwargs, "function_call")
	assert.Equal(t, 1, got.AdditionalKwargs["keep"])
	assert.Len(t, last.ToolCalls, 1, "input not mutated")
}

func TestLoopWindowSlidingAndThreads(t *testing.T) {
	m := loopMW(t, func(c *LoopDetectionConfig) { c.WindowSize, c.WarnThreshold, c.HardLimit = 4, 3, 4 })
	rt := testRuntime()
	afterLoop(t, m, rt, lsCall("/a"))
	afterLoop(t, m, rt, lsCall("/a"))
	for _, p := range []string{"/b", "/c", "/d", "/e"} {
		afterLoop(t, m, rt, lsCall(p))
	}
	assert.Nil(t, afterLoop(t, m, rt, lsCall("/a")), "old repeats slid out of the window")
	assert.Empty(t, m.Pending("thread-1", "run-1"))

	// Per-thread isolation and LRU eviction.
	m2 := loopMW(t, func(c *LoopDetectionConfig) { c.MaxTrackedThreads, c.WarnThreshold = 3, 2 })
	for i := range 4 {
		r := testRuntime()
		r.ThreadID = fmt.Sprintf("t%d", i)
		afterLoop(t, m2, r, lsCall("/a"))
	}
	assert.Equal(t, 3, m2.TrackedThreads())
	r0 := testRuntime()
	r0.ThreadID = "t0"
	afterLoop(t, m2, r0, lsCall("/a"))
	assert.Empty(t, m2.Pending("t0", "run-1"), "t0 was evicted: its history restarted")
	noThread := &agent.Runtime{RunID: "r", Context: agent.NewRunContext()}
	afterLoop(t, m2, noThread, lsCall("/z"))
	afterLoop(t, m2, noThread, lsCall("/z"))
	assert.NotEmpty(t, m2.Pending("default", "r"), "missing thread id is 'default'")
	m2.Reset("")
	assert.Zero(t, m2.TrackedThreads())
}

func TestLoopToolFrequency(t *testing.T) {
	m := loopMW(t, func(c *LoopDetectionConfig) {
		c.ToolFreqWarn, c.ToolFreqHardLimit = 3, 5
		c.WarnThreshold, c.HardLimit = 10, 20
	})
	rt := testRuntime()
	read := func(i int) message.ToolCall {
		return call(fmt.Sprint(i), "read_file", map[string]any{"path": fmt.Sprintf("f%d", i)})
	}
	afterLoop(t, m, rt, read(1))
	afterLoop(t, m, rt, read(2))
	afterLoop(t, m, rt, read(3))
	require.Len(t, m.Pending("thread-1", "run-1"), 1)
	assert.Contains(t, m.Pending("thread-1", "run-1")[0], "read_file 3 times")
	afterLoop(t, m, rt, read(4))
	assert.Len(t, m.Pending("thread-1", "run-1"), 1, "warned once per tool")
	u := afterLoop(t, m, rt, read(5))
	require.NotNil(t, u)
	assert.Contains(t, u.Messages[0].Content, "[FORCED STOP] Tool read_file called 5 times")
	assert.Equal(t, agent.StopLoopCapped, rt.Context.StopReason())

	// Multiple calls in one response each count; overrides use their own thresholds.
	m2 := loopMW(t, func(c *LoopDetectionConfig) {
		c.ToolFreqOverrides = map[string]ToolFreqOverride{"bash": {Warn: 2, HardLimit: 3}}
	})
	u = afterLoop(t, m2, testRuntime(), call("1", "bash", map[string]any{"command": "a"}), call("2", "bash", map[string]any{"command": "b"}), call("3", "bash", map[string]any{"command": "c"}))
	assert.Nil(t, u, "returns at the first hit (the warning at 2)")
	assert.Contains(t, m2.Pending("thread-1", "run-1")[0], "bash 2 times")
	assert.GreaterOrEqual(t, m2.FrequencyWindow(), 50)
	m3 := loopMW(t, func(c *LoopDetectionConfig) {
		c.ToolFreqOverrides = map[string]ToolFreqOverride{"bash": {Warn: 100, HardLimit: 120}}
	})
	assert.Equal(t, 120, m3.FrequencyWindow())
}

func TestLoopToolFrequencyDefaultsStopTightBurst(t *testing.T) {
	m := loopMW(t, nil)
	rt := testRuntime()
	var u *state.Update
	for i := 0; i < 50 && u == nil; i++ {
		u = afterLoop(t, m, rt, call(fmt.Sprint(i), "bash", map[string]any{"command": fmt.Sprintf("echo %d", i)}))
	}
	require.NotNil(t, u, "50 distinct bash calls hard-stop under the defaults")
	assert.Equal(t, agent.StopLoopCapped, rt.Context.StopReason())
}

func TestLoopDetectionConcurrentThreads(t *testing.T) {
	m := loopMW(t, nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := testRuntime()
			r.ThreadID = fmt.Sprintf("t%d", i%4)
			for j := range 20 {
				_, _ = m.AfterModel(context.Background(), r, st(aiMsg("a", "", lsCall(fmt.Sprint(j%3)))))
				_, _ = m.WrapModelCall(context.Background(), modelReq(r), okHandler("x"))
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, m.TrackedThreads(), 4)
}

func TestLoopWarningIsTransientInRealLoop(t *testing.T) {
	m := loopMW(t, func(c *LoopDetectionConfig) { c.WarnThreshold, c.HardLimit = 2, 3 })
	p := &scriptedProvider{}
	same := aiMsg("", "", call("", "ls", map[string]any{"path": "/"}))
	for range 3 {
		p.turns = append(p.turns, func(*model.Request) (*model.Response, error) {
			c := same.Clone()
			c.ToolCalls[0].ID = message.NewToolCallID()
			return &model.Response{Message: c}, nil
		})
	}
	res := runAgent(t, p, []agent.Middleware{m}, "list")
	reqs := p.requests()
	require.Len(t, reqs, 3)
	last := reqs[2].Messages[len(reqs[2].Messages)-1]
	assert.Equal(t, "loop_warning", last.Name, "injected in the request after the warn")
	for _, msg := range res.State.Messages {
		assert.NotEqual(t, "loop_warning", msg.Name, "never persisted")
	}
	assert.Equal(t, agent.StopLoopCapped, res.StopReason)
	assert.True(t, strings.HasSuffix(res.Answer, LoopHardStopMessage))
}
