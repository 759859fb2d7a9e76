package middleware

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

type memStore struct {
	mem   map[string]string
	saved []string
}

func (s *memStore) Load(_ context.Context, user, agentName string) (string, error) {
	return s.mem[user+"/"+agentName], nil
}
func (s *memStore) Save(_ context.Context, user, agentName, memory string) error {
	if s.mem == nil {
		s.mem = map[string]string{}
	}
	s.mem[user+"/"+agentName] = memory
	s.saved = append(s.saved, memory)
	return nil
}

func TestDynamicContextFirstTurnIDSwap(t *testing.T) {
	clock := newFakeClock() // 2026-11-30, a Monday
	store := &memStore{mem: map[string]string{"user-1/lead_agent": "- likes <b>tea</b>"}}
	m := NewDynamicContextMiddleware(clock, store, DefaultSettings().Memory)
	rt := testRuntime()
	j := journal.New(journal.Options{})
	rt.Journal = j
	s := st(human("u1", "hello"))
	u, err := m.BeforeAgent(context.Background(), rt, s)
	require.NoError(t, err)
	s = mustApply(t, s, u)
	require.Len(t, s.Messages, 3)
	date, mem, user := s.Messages[0], s.Messages[1], s.Messages[2]
	assert.Equal(t, "u1", date.ID, "the reminder takes the original id")
	assert.Equal(t, message.RoleSystem, date.Role)
	assert.Equal(t, "<system-reminder>\n<current_date>2026-11-30, Monday</current_date>\n</system-reminder>", date.Content)
	assert.Equal(t, "2026-11-30", date.AdditionalKwargs[KwargReminderDate])
	assert.Equal(t, "u1__memory", mem.ID)
	assert.Equal(t, message.RoleHuman, mem.Role, "memory is never in the system role")
	assert.Contains(t, mem.Content, "&lt;b&gt;tea")
	assert.Equal(t, true, mem.AdditionalKwargs[KwargDynamicContextReminder])
	assert.NotContains(t, mem.AdditionalKwargs, KwargReminderDate, "reminder_date only on the date message")
	assert.Equal(t, "u1__user", user.ID)
	assert.Equal(t, "hello", user.Content)
	var recorded bool
	for _, e := range j.Events() {
		recorded = recorded || e.Type == "context:memory"
	}
	assert.True(t, recorded, "effective memory recorded on the journal")

	u, _ = m.BeforeAgent(context.Background(), rt, mustApply(t, s, &state.Update{Messages: []message.Message{human("u2", "again")}}))
	assert.Nil(t, u, "same day: nothing")

	clock.Advance(24 * time.Hour)
	s2 := mustApply(t, s, &state.Update{Messages: []message.Message{aiMsg("a", "hi"), human("u3", "next day")}})
	u, _ = m.BeforeAgent(context.Background(), rt, s2)
	s2 = mustApply(t, s2, u)
	n := len(s2.Messages)
	assert.Equal(t, "u3", s2.Messages[n-2].ID)
	assert.Contains(t, s2.Messages[n-2].Content, "2026-12-01, Tuesday")
	assert.Equal(t, "u3__user", s2.Messages[n-1].ID, "midnight: date-only reminder with ID swap")
	assert.Equal(t, 6, n, "no memory block on the date update")
	assert.NotEqual(t, "u3__memory", s2.Messages[n-2].ID)
	u, _ = m.BeforeAgent(context.Background(), rt, s2)
	assert.Nil(t, u, "no second injection once updated")

	u, _ = m.BeforeAgent(context.Background(), rt, st())
	assert.Nil(t, u)
	legacy := st(message.Message{ID: "s", Role: message.RoleSystem, Content: "<current_date>2026-11-30, Monday</current_date>"}, human("u", "q"))
	u, _ = NewDynamicContextMiddleware(newFakeClock(), nil, MemorySettings{}).BeforeAgent(context.Background(), rt, legacy)
	assert.Nil(t, u, "legacy content-only date detected")
}

func TestDynamicContextTargetsLatestUserKeepingOrder(t *testing.T) {
	m := NewDynamicContextMiddleware(newFakeClock(), nil, MemorySettings{})
	s := st(human("old", "first"), aiMsg("a", "x"), human("new", "second"), aiMsg("b", "y"))
	u, err := m.BeforeAgent(context.Background(), testRuntime(), s)
	require.NoError(t, err)
	s = mustApply(t, s, u)
	var order []string
	for _, msg := range s.Messages {
		order = append(order, msg.ID)
	}
	assert.Equal(t, []string{"old", "a", "new", "new__user", "b"}, order)
}

func TestSummarizationPreservesReminderAndLatestUser(t *testing.T) {
	cfg := DefaultSummarizationConfig()
	cfg.Enabled, cfg.MaxTokensBeforeSummary, cfg.KeepMessages = true, 10, 2
	m, err := NewSummarizationMiddleware(cfg, nil)
	require.NoError(t, err)
	tm := &titleModel{answer: "compressed summary"}
	rt := testRuntime()
	rt.Model = tm
	reminder := message.Message{ID: "u2", Role: message.RoleSystem, Content: "<current_date>", AdditionalKwargs: map[string]any{KwargDynamicContextReminder: true}}
	stale := human("u1__user", "old request")
	s := st(stale, aiMsg("a1", "old answer"), reminder, human("u2__user", "current request"),
		aiMsg("a2", "", call("c1", "ls", nil)), toolMsg("t1", "c1", "ls", strings.Repeat("x", 200)))
	u, err := m.BeforeModel(context.Background(), rt, s)
	require.NoError(t, err)
	require.NotNil(t, u)
	assert.True(t, u.RemoveAll)
	assert.Equal(t, "compressed summary", u.Extra[SummaryTextKey])
	var kept []string
	for _, msg := range u.Messages {
		kept = append(kept, msg.ID)
		assert.NotEqual(t, "summary", msg.Name, "the summary is not injected into messages")
	}
	assert.Equal(t, []string{"u2", "u2__user", "a2", "t1"}, kept, "reminder and current request rescued; stale peer compressed")
	require.Len(t, tm.reqs, 1)
	assert.Equal(t, SummarizeCaller, tm.reqs[0].Caller)
	prompt := tm.reqs[0].Messages[0].Content
	assert.Contains(t, prompt, "old request")
	assert.NotContains(t, prompt, "current request")

	// Previous summary counts toward the trigger and is included (escaped) in the prompt.
	s2 := st(human("h", "a"), aiMsg("x", "b"), human("h2", "c"))
	s2.Extra = map[string]any{SummaryTextKey: "prev <summary> & " + strings.Repeat("y", 100)}
	cfg2 := cfg
	cfg2.KeepMessages = 1
	m2, _ := NewSummarizationMiddleware(cfg2, nil)
	tm.reqs = nil
	u, _ = m2.BeforeModel(context.Background(), rt, s2)
	require.NotNil(t, u)
	assert.Contains(t, tm.reqs[0].Messages[0].Content, "<existing_summary>\nprev &lt;summary&gt; &amp;")

	// Below the trigger: nothing; all models failing: no compaction.
	low := cfg
	low.MaxTokensBeforeSummary = 100000
	m3, _ := NewSummarizationMiddleware(low, nil)
	u, _ = m3.BeforeModel(context.Background(), rt, s)
	assert.Nil(t, u)
	failing := testRuntime()
	failing.Model = &titleModel{err: errors.New("down")}
	u, _ = m.BeforeModel(context.Background(), failing, s)
	assert.Nil(t, u, "model failure keeps history")
	blank := testRuntime()
	blank.Model = &titleModel{answer: "  "}
	u, _ = m.BeforeModel(context.Background(), blank, s)
	assert.Nil(t, u, "a blank summary is a failure")

}

func TestSummarizationNeverSplitsToolPairs(t *testing.T) {
	cfg := DefaultSummarizationConfig()
	cfg.KeepMessages = 1
	m, _ := NewSummarizationMiddleware(cfg, nil)
	msgs := []message.Message{human("h", "q"), aiMsg("a0", "x"), aiMsg("a", "", call("c", "ls", nil)), toolMsg("t", "c", "ls", "r")}
	sum, keep, ok := m.Partition(msgs)
	require.True(t, ok)
	assert.Equal(t, []string{"a0"}, idsOf(sum))
	assert.Equal(t, []string{"h", "a", "t"}, idsOf(keep))
}

func idsOf(msgs []message.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

func TestTodoPlanMode(t *testing.T) {
	m := NewTodoMiddleware(DefaultSettings().PlanMode)
	ctx, rt := context.Background(), testRuntime()
	u, _ := m.BeforeModel(ctx, rt, st(human("h", "q")))
	assert.Nil(t, u, "no todos")
	s := st(human("h", "q"))
	s.Todos = []state.Todo{{Content: "A", Status: "completed"}, {Content: "B"}}
	u, _ = m.BeforeModel(ctx, rt, s)
	require.NotNil(t, u)
	rem := u.Messages[0]
	assert.Equal(t, "todo_reminder", rem.Name)
	assert.Equal(t, true, rem.AdditionalKwargs["hide_from_ui"])
	assert.Contains(t, rem.Content, "- [completed] A\n- [pending] B")
	assert.Contains(t, rem.Content, "<system_reminder>")
	s2 := mustApply(t, s, u)
	u, _ = m.BeforeModel(ctx, rt, s2)
	assert.Nil(t, u, "reminder present")

	final := mustApply(t, s, &state.Update{Messages: []message.Message{aiMsg("a", "done!")}})
	for i := range 2 {
		u, _ = m.AfterModel(ctx, rt, final)
		require.NotNil(t, u, "reminder %d", i)
		assert.Equal(t, state.JumpModel, u.JumpTo)
		assert.Empty(t, u.Messages, "nothing persisted")
		var seen []message.Message
		_, _ = m.WrapModelCall(ctx, modelReq(rt, human("h", "q")), func(_ context.Context, r *agent.ModelRequest) (*agent.ModelResponse, error) {
			seen = r.Request.Messages
			return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
		})
		assert.Contains(t, seen[0].Content, "write_todos", "base prompt injected")
		last := seen[len(seen)-1]
		assert.Equal(t, "todo_completion_reminder", last.Name)
		assert.Contains(t, last.Content, "- [pending] B")
		assert.NotContains(t, last.Content, "[completed] A", "only incomplete items")
	}
	u, _ = m.AfterModel(ctx, rt, final)
	assert.Nil(t, u, "after 2 reminders the answer may stand")
	withTools := mustApply(t, s, &state.Update{Messages: []message.Message{aiMsg("a", "", call("c", "ls", nil))}})
	u, _ = NewTodoMiddleware(DefaultSettings().PlanMode).AfterModel(ctx, testRuntime(), withTools)
	assert.Nil(t, u, "still using tools")
}

func TestViewImage(t *testing.T) {
	m := NewViewImageMiddleware()
	ctx := context.Background()
	ai := aiMsg("a", "", call("v1", "view_image", map[string]any{"image_path": "x.png"}))
	s := st(human("h", "look"), ai)
	u, _ := m.BeforeModel(ctx, testRuntime(), s)
	assert.Nil(t, u, "tool result not there yet")
	s = mustApply(t, s, &state.Update{Messages: []message.Message{toolMsg("t", "v1", "view_image", "ok")},
		Extra: map[string]any{"viewed_images": map[string]any{"x.png": map[string]any{"base64": "iVBOR", "mime_type": "image/png"}}}})
	u, _ = m.BeforeModel(ctx, testRuntime(), s)
	require.NotNil(t, u)
	img := u.Messages[0]
	assert.Equal(t, "view-image-context:a", img.ID)
	assert.Equal(t, true, img.AdditionalKwargs[KwargViewImageMarker])
	blocks := img.AdditionalKwargs[KwargContentBlocks].([]any)
	require.Len(t, blocks, 3, "header, description, image_url")
	assert.Equal(t, "data:image/png;base64,iVBOR", blocks[2].(map[string]any)["image_url"].(map[string]any)["url"])
	s = mustApply(t, s, u)
	u, _ = m.BeforeModel(ctx, testRuntime(), s)
	assert.Nil(t, u, "already injected")
	s = mustApply(t, s, &state.Update{Messages: []message.Message{aiMsg("b", "I see it"), {ID: "view-image-context:client", Role: message.RoleHuman, Content: "user text"}}})
	u, _ = m.AfterModel(ctx, testRuntime(), s)
	assert.Equal(t, []string{"view-image-context:a"}, u.RemoveMessageIDs, "only marked messages removed")
}

func TestMemoryMiddleware(t *testing.T) {
	store := &memStore{}
	m, err := NewMemoryMiddleware(DefaultSettings().Memory, store, nil)
	require.NoError(t, err)
	rt := testRuntime()
	rt.AgentName = "researcher"
	rt.UserID = "runtime-user"
	reminder := message.Message{ID: "r", Role: message.RoleSystem, Content: "date", AdditionalKwargs: map[string]any{KwargDynamicContextReminder: true}}
	s := st(reminder, human("u", "I prefer metric units"), aiMsg("a", "", call("c", "ls", nil)), toolMsg("t", "c", "ls", "x"), aiMsg("b", "Noted."))
	u, err := m.AfterAgent(context.Background(), rt, s)
	require.NoError(t, err)
	assert.Nil(t, u)
	mem := store.mem["runtime-user/researcher"]
	assert.Equal(t, "User: I prefer metric units\nAssistant: Noted.\n", mem, "user inputs and final answers only")

	tm := &titleModel{answer: "- prefers metric units"}
	f := modelFactoryFor(t, tm)
	cfg := DefaultSettings().Memory
	cfg.ModelName = "mem"
	mm, err := NewMemoryMiddleware(cfg, store, f)
	require.NoError(t, err)
	_, _ = mm.AfterAgent(context.Background(), rt, s)
	require.Len(t, tm.reqs, 1)
	assert.Equal(t, MemoryCaller, tm.reqs[0].Caller)
	assert.Equal(t, "- prefers metric units\n", store.mem["runtime-user/researcher"])

	off := DefaultSettings().Memory
	off.Enabled = false
	mo, _ := NewMemoryMiddleware(off, store, nil)
	before := len(store.saved)
	_, _ = mo.AfterAgent(context.Background(), rt, s)
	assert.Len(t, store.saved, before, "disabled: no-op")
	fs := NewFileMemoryStore(RuntimeSettings{BaseDir: t.TempDir()})
	require.NoError(t, fs.Save(context.Background(), "u", "lead_agent", "m1"))
	got, err := fs.Load(context.Background(), "u", "lead_agent")
	require.NoError(t, err)
	assert.Equal(t, "m1", got)
	_, err = fs.Load(context.Background(), "../x", "lead_agent")
	assert.Error(t, err)
}

func TestTerminalResponseRetriesOnceThenFallback(t *testing.T) {
	m := NewTerminalResponseMiddleware()
	ctx, rt := context.Background(), testRuntime()
	_, _ = m.BeforeAgent(ctx, rt, st())
	s := st(human("h", "q"), aiMsg("a", "", call("c", "ls", nil)), toolMsg("t", "c", "ls", "r"), aiMsg("e", ""))
	u, _ := m.AfterModel(ctx, rt, s)
	require.NotNil(t, u)
	assert.Equal(t, state.JumpModel, u.JumpTo)
	assert.Equal(t, []string{"e"}, u.RemoveMessageIDs)
	var seen []message.Message
	_, _ = m.WrapModelCall(ctx, modelReq(rt, human("h", "q")), func(_ context.Context, r *agent.ModelRequest) (*agent.ModelResponse, error) {
		seen = r.Request.Messages
		return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
	})
	assert.Equal(t, "terminal_response_recovery", seen[len(seen)-1].Name)
	u, _ = m.AfterModel(ctx, rt, s)
	require.NotNil(t, u)
	assert.Equal(t, TerminalResponseFallback, u.Messages[0].Content)
	assert.Equal(t, true, u.Messages[0].AdditionalKwargs[message.KwargErrorFallback])
	u, _ = m.AfterModel(ctx, testRuntime(), st(human("h", "q"), aiMsg("e", "")))
	assert.Nil(t, u, "no tool result in the turn: no retry")
}

func TestModelLengthFinishReason(t *testing.T) {
	m := NewModelLengthFinishReasonMiddleware()
	ctx := context.Background()
	for _, tc := range []struct {
		msg  message.Message
		want string
	}{
		{withFinish(aiMsg("a", "<xml>partial"), "finish_reason", "length"), agent.StopModelLengthCapped},
		{withFinish(aiMsg("a", "text"), "stop_reason", "max_tokens"), agent.StopModelLengthCapped},
		{withFinish(aiMsg("a", "text"), "finish_reason", "MAX_TOKENS"), agent.StopModelLengthCapped},
		{withFinish(aiMsg("a", "text"), "finish_reason", "stop"), ""},
		{withFinish(aiMsg("a", "", call("c", "ls", nil)), "finish_reason", "length"), ""},
		{withFinish(aiMsg("a", " "), "finish_reason", "length"), ""},
		{human("h", "x"), ""},
	} {
		rt := testRuntime()
		u, err := m.AfterModel(ctx, rt, st(tc.msg))
		require.NoError(t, err)
		assert.Nil(t, u, "never rewrites content")
		assert.Equal(t, tc.want, rt.Context.StopReason())
	}
	kw := aiMsg("a", "text")
	kw.ResponseMetadata = nil
	kw.AdditionalKwargs = map[string]any{"finish_reason": "length"}
	rt := testRuntime()
	_, _ = m.AfterModel(ctx, rt, st(kw))
	assert.Equal(t, agent.StopModelLengthCapped, rt.Context.StopReason())
	rt.Context.SetStopReason(agent.StopTokenCapped)
	_, _ = m.AfterModel(ctx, rt, st(withFinish(aiMsg("a", "t"), "finish_reason", "length")))
	assert.Equal(t, agent.StopTokenCapped, rt.Context.StopReason(), "existing stop reason not overwritten")
}

func TestTokenBudget(t *testing.T) {
	cfg := DefaultTokenBudgetConfig()
	cfg.Enabled, cfg.MaxTokens = true, 1000
	m, err := NewTokenBudgetMiddleware(cfg)
	require.NoError(t, err)
	ctx, rt := context.Background(), testRuntime()
	prior := aiMsg("old", "earlier run")
	prior.UsageMetadata = usage(5000, 5000, 10000)
	s := st(prior, human("h", "q"))
	_, _ = m.BeforeAgent(ctx, rt, s)
	a1 := aiMsg("a1", "", call("c", "ls", nil))
	a1.UsageMetadata = usage(500, 100, 600)
	s = mustApply(t, s, &state.Update{Messages: []message.Message{a1}})
	u, _ := m.AfterModel(ctx, rt, s)
	assert.Nil(t, u, "below threshold; the earlier run's usage is baseline")
	a2 := aiMsg("a2", "", call("c2", "ls", nil))
	a2.UsageMetadata = usage(200, 50, 250)
	s = mustApply(t, s, &state.Update{Messages: []message.Message{toolMsg("t", "c", "ls", "r"), a2}})
	u, _ = m.AfterModel(ctx, rt, s)
	assert.Nil(t, u, "warn only does not stop")
	assert.Empty(t, rt.Context.StopReason())
	var seen []message.Message
	h := func(_ context.Context, r *agent.ModelRequest) (*agent.ModelResponse, error) {
		seen = r.Request.Messages
		return &agent.ModelResponse{Message: aiMsg("r", "ok")}, nil
	}
	_, _ = m.WrapModelCall(ctx, modelReq(rt, human("h", "q")), h)
	assert.Equal(t, "budget_warning", seen[len(seen)-1].Name)
	assert.Contains(t, seen[len(seen)-1].Content, "TOKEN BUDGET WARNING")
	_, _ = m.WrapModelCall(ctx, modelReq(rt, human("h", "q")), h)
	assert.Len(t, seen, 1, "warned once per run")

	// Subagent usage merged later onto a dispatcher counts as a positive delta.
	merged := a1.Clone()
	merged.UsageMetadata = usage(700, 150, 850)
	s = mustApply(t, s, &state.Update{Messages: []message.Message{merged}})
	u, _ = m.AfterModel(ctx, rt, s)
	require.NotNil(t, u)
	got := u.Messages[0]
	assert.Equal(t, "a2", got.ID)
	assert.Empty(t, got.ToolCalls)
	assert.Contains(t, got.Content, "TOKEN BUDGET EXCEEDED")
	assert.Equal(t, agent.StopTokenCapped, rt.Context.StopReason())
	_, _, total := m.Usage(rt)
	assert.Equal(t, int64(1100), total)

	in := DefaultTokenBudgetConfig()
	in.Enabled, in.MaxInputTokens = true, 100
	mi, _ := NewTokenBudgetMiddleware(in)
	rt2 := testRuntime()
	big := aiMsg("x", "", call("c", "ls", nil))
	big.UsageMetadata = usage(150, 1, 151)
	u, _ = mi.AfterModel(ctx, rt2, st(big))
	require.NotNil(t, u)
	assert.Contains(t, u.Messages[0].Content, "input token")
}

func TestSystemMessageCoalescing(t *testing.T) {
	out, changed := CoalesceSystemMessages([]message.Message{human("h", "q")})
	assert.False(t, changed)
	assert.Len(t, out, 1)
	_, changed = CoalesceSystemMessages([]message.Message{message.System("only"), human("h", "q")})
	assert.False(t, changed, "single leading system message passes through")
	r1 := message.Message{ID: "r1", Role: message.RoleSystem, Content: "<current_date>2026-11-29</current_date>", AdditionalKwargs: map[string]any{KwargDynamicContextReminder: true}}
	r2 := message.Message{ID: "r2", Role: message.RoleSystem, Content: "<current_date>2026-11-30</current_date>", AdditionalKwargs: map[string]any{KwargDynamicContextReminder: true, "k": 2}}
	sys := message.Message{ID: "sys", Role: message.RoleSystem, Content: "static", AdditionalKwargs: map[string]any{"k": 1}}
	out, changed = CoalesceSystemMessages([]message.Message{sys, r1, human("h1", "a"), aiMsg("a", "b"), r2, human("h2", "c")})
	require.True(t, changed)
	require.Len(t, out, 4)
	assert.Equal(t, "sys", out[0].ID, "first id kept")
	assert.Equal(t, "static\n\n<current_date>2026-11-30</current_date>", out[0].Content, "only the last reminder kept")
	assert.Equal(t, 2, out[0].AdditionalKwargs["k"], "later kwargs win")
	assert.Equal(t, []string{"h1", "a", "h2"}, idsOf(out[1:]))
}

// modelFactoryFor returns a factory whose model "mem" is m (through a registered test provider).
func modelFactoryFor(t *testing.T, m model.Provider) *model.Factory {
	t.Helper()
	testProviders.Store("mem", m)
	f, err := model.NewFactory(testModelConfigs("mem"))
	require.NoError(t, err)
	return f
}
