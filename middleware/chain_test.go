package middleware

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
)

type named struct{ name string }

func (n named) Name() string { return n.name }
func (named) AfterModel(context.Context, *agent.Runtime, *state.State) (*state.Update, error) {
	return nil, nil
}

type visionModel struct{ vision bool }

func (visionModel) Generate(context.Context, *model.Request) (*model.Response, error) {
	return nil, errors.New("unused")
}
func (v visionModel) Info() model.Info { return model.Info{Name: "m", SupportsVision: v.vision} }

func ptr[T any](v T) *T { return &v }

func build(t *testing.T, o Options) []string {
	t.Helper()
	c, err := BuildMiddlewares(o)
	require.NoError(t, err)
	return Names(c)
}

func allEnabled() Options {
	cfg := DefaultConfig()
	cfg.Summarization.Enabled = true
	cfg.TokenBudget.Enabled = true
	cfg.Guardrails.Enabled, cfg.Guardrails.Provider = true, "tool_policy"
	cfg.Settings.PlanMode.Enabled = true
	cfg.ToolProgress.Enabled = true
	return Options{Config: cfg, Model: visionModel{true}}
}

func TestChainOrderDefaults(t *testing.T) {
	assert.Equal(t, []string{
		NameInputSanitization, NameToolOutputBudget, NameToolResultSanitization,
		NameThreadData, NameUploads, NameSandbox, NameDanglingToolCall, NameLLMErrorHandling, NameSandboxAudit, NameReadBeforeWrite, NameToolErrorHandling,
		NameDynamicContext, NameDurableContext, NameTokenUsage, NameTitle, NameMemory, NameSystemMessageCoalescing, NameSubagentLimit,
		NameLoopDetection, NameTerminalResponse, NameModelLengthFinishReason, NameSafetyFinishReason, NameClarification,
	}, build(t, Options{Config: DefaultConfig()}))
}

func TestChainOrderEverythingEnabled(t *testing.T) {
	names := build(t, allEnabled())
	assert.Equal(t, []string{
		NameInputSanitization, NameToolOutputBudget, NameToolResultSanitization,
		NameThreadData, NameUploads, NameSandbox, NameDanglingToolCall, NameLLMErrorHandling, NameGuardrail,
		NameSandboxAudit, NameReadBeforeWrite, NameToolProgress, NameToolErrorHandling,
		NameDynamicContext, NameDurableContext, NameSummarization, NameTodo, NameTokenUsage, NameTitle, NameMemory, NameViewImage,
		NameSystemMessageCoalescing, NameSubagentLimit, NameLoopDetection, NameTokenBudget,
		NameTerminalResponse, NameModelLengthFinishReason, NameSafetyFinishReason, NameClarification,
	}, names)
	chain, err := BuildMiddlewares(allEnabled())
	require.NoError(t, err)
	h := Hooks(chain)
	// DeerFlow's per-hook execution order, restricted to the middlewares agentmeter builds.
	assert.Equal(t, []string{NameThreadData, NameUploads, NameToolProgress, NameDynamicContext, NameTodo, NameLoopDetection, NameTokenBudget, NameTerminalResponse}, h.BeforeAgent)
	assert.Equal(t, []string{NameDurableContext, NameSummarization, NameTodo, NameViewImage}, h.BeforeModel)
	assert.Equal(t, []string{NameInputSanitization, NameToolOutputBudget, NameDanglingToolCall, NameLLMErrorHandling, NameToolProgress, NameDurableContext, NameTodo, NameSystemMessageCoalescing,
		NameLoopDetection, NameTokenBudget, NameTerminalResponse}, h.WrapModelCall)
	assert.Equal(t, []string{NameSafetyFinishReason, NameModelLengthFinishReason, NameTerminalResponse, NameTokenBudget,
		NameLoopDetection, NameSubagentLimit, NameViewImage, NameTitle, NameTokenUsage, NameTodo, NameDurableContext}, h.AfterModel, "reverse list order")
	assert.Equal(t, []string{NameToolOutputBudget, NameToolResultSanitization, NameSandbox, NameGuardrail, NameSandboxAudit,
		NameReadBeforeWrite, NameToolProgress, NameToolErrorHandling, NameClarification}, h.WrapToolCall)
	assert.Equal(t, []string{NameTerminalResponse, NameTokenBudget, NameLoopDetection, NameMemory, NameTodo, NameSandbox}, h.AfterAgent)
}

func TestChainConditions(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LoopDetection.Enabled = false
	cfg.SafetyFinishReason.Enabled = false
	cfg.TokenUsage.Enabled = false
	cfg.ReadBeforeWrite.Enabled = false
	names := build(t, Options{Config: cfg, SubagentEnabled: ptr(false), Model: visionModel{false}})
	for _, absent := range []string{NameLoopDetection, NameSafetyFinishReason, NameTokenUsage, NameSubagentLimit, NameViewImage, NameTodo, NameSummarization, NameGuardrail, NameTokenBudget, NameReadBeforeWrite} {
		assert.NotContains(t, names, absent)
	}
	assert.Equal(t, NameClarification, names[len(names)-1])
	// Guardrails enabled without a provider: not built (DeerFlow needs a provider).
	g := DefaultConfig()
	g.Guardrails.Enabled = true
	assert.NotContains(t, build(t, Options{Config: g}), NameGuardrail)
	// Plan mode from the runtime option wins over settings.
	assert.Contains(t, build(t, Options{Config: DefaultConfig(), PlanMode: ptr(true)}), NameTodo)
}

func TestChainStrictRuntimeSpineOrder(t *testing.T) {
	names := build(t, allEnabled())
	// test_build_lead_runtime_middlewares_chain_order_matches_agents_md.
	spine := []string{NameInputSanitization, NameToolOutputBudget, NameThreadData, NameUploads, NameSandbox, NameDanglingToolCall,
		NameLLMErrorHandling, NameSandboxAudit, NameReadBeforeWrite, NameToolErrorHandling}
	last := -1
	for _, n := range spine {
		i := slices.Index(names, n)
		require.GreaterOrEqual(t, i, 0, n)
		assert.Greater(t, i, last, n)
		last = i
		assert.Equal(t, 1, countOf(names, n), "exactly once: %s", n)
	}
	shared, err := BuildRuntimeMiddlewares(allEnabled())
	require.NoError(t, err)
	assert.Equal(t, Names(shared), names[:len(shared)], "the shared phase is the chain head")
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

func TestChainCustomAndExtensionsBeforeTail(t *testing.T) {
	RegisterExtension("test.ConfiguredGuard", func() (agent.Middleware, error) { return named{"ConfiguredGuard"}, nil })
	RegisterExtension("test.ConfiguredAudit", func() (agent.Middleware, error) { return named{"ConfiguredAudit"}, nil })
	RegisterExtension("test.Broken", func() (agent.Middleware, error) { return nil, errors.New("constructor failed") })
	o := Options{Config: DefaultConfig(), Custom: []agent.Middleware{named{"CustomMiddleware"}}}
	o.Config.Extensions.Middlewares = []string{"test.ConfiguredGuard", "test.ConfiguredAudit"}
	names := build(t, o)
	assert.Equal(t, []string{"CustomMiddleware", "ConfiguredGuard", "ConfiguredAudit", NameTerminalResponse,
		NameModelLengthFinishReason, NameSafetyFinishReason, NameClarification}, names[len(names)-7:])

	o.Config.Extensions.Middlewares = []string{"test.Missing"}
	_, err := BuildMiddlewares(o)
	assert.ErrorContains(t, err, `extensions.middlewares[0]: "test.Missing" is not a registered extension middleware`)
	o.Config.Extensions.Middlewares = []string{"test.Broken"}
	_, err = BuildMiddlewares(o)
	assert.ErrorContains(t, err, "constructor failed")
	assert.ErrorContains(t, (&ExtensionsConfig{Middlewares: []string{"nope"}}).Validate(), `middlewares[0]: "nope"`)
}

func TestAssertOrdering(t *testing.T) {
	chain, err := BuildMiddlewares(allEnabled())
	require.NoError(t, err)
	require.NoError(t, AssertOrdering(chain))

	swap := func(a, b string) []agent.Middleware {
		c := slices.Clone(chain)
		i, j := slices.IndexFunc(c, func(m agent.Middleware) bool { return m.Name() == a }), slices.IndexFunc(c, func(m agent.Middleware) bool { return m.Name() == b })
		c[i], c[j] = c[j], c[i]
		return c
	}
	var oe *OrderingError
	err = AssertOrdering(swap(NameSafetyFinishReason, NameLoopDetection))
	require.ErrorAs(t, err, &oe)
	assert.ErrorContains(t, err, "SafetyFinishReasonMiddleware sees responses first")
	assert.ErrorContains(t, AssertOrdering(swap(NameThreadData, NameUploads)), "ThreadDataMiddleware before UploadsMiddleware")
	assert.ErrorContains(t, AssertOrdering(swap(NameDanglingToolCall, NameLLMErrorHandling)), "DanglingToolCallMiddleware before LLMErrorHandlingMiddleware")
	assert.ErrorContains(t, AssertOrdering(swap(NameGuardrail, NameToolErrorHandling)), "GuardrailMiddleware before ToolErrorHandlingMiddleware")
	assert.ErrorContains(t, AssertOrdering(append(slices.Clone(chain), named{"Late"})), "ClarificationMiddleware last")
	assert.ErrorContains(t, AssertOrdering(append(slices.Clone(chain[:len(chain)-1]), named{NameTitle}, chain[len(chain)-1])), "appears twice")
	// A custom after_model middleware registered after Safety breaks the invariant.
	bad := slices.Clone(chain)
	bad = slices.Insert(bad, len(bad)-1, agent.Middleware(named{"LateAfterModel"}))
	assert.ErrorContains(t, AssertOrdering(bad), "LateAfterModel")
}

func TestSubagentChain(t *testing.T) {
	c, err := BuildSubagentMiddlewares(Options{Config: DefaultConfig(), Model: visionModel{true}})
	require.NoError(t, err)
	names := Names(c)
	assert.Equal(t, []string{NameInputSanitization, NameToolOutputBudget, NameToolResultSanitization, NameThreadData, NameSandbox,
		NameDanglingToolCall, NameLLMErrorHandling, NameSandboxAudit, NameReadBeforeWrite, NameToolErrorHandling, NameViewImage, NameLoopDetection,
		NameTokenBudget, NameSafetyFinishReason, NameDurableContext, NameSubagentDateContext, NameSystemMessageCoalescing}, names)
	for _, absent := range []string{NameUploads, NameTitle, NameMemory, NameTokenUsage, NameSubagentLimit, NameClarification, NameTodo, NameTerminalResponse, NameDynamicContext} {
		assert.NotContains(t, names, absent)
	}
	assert.Less(t, slices.Index(names, NameLoopDetection), slices.Index(names, NameSafetyFinishReason))
	// DeerFlow's subagent budget: on by default, 2 M tokens without summarization, warn 0.7.
	tb := findMW[*TokenBudgetMiddleware](c)
	require.NotNil(t, tb)
	assert.Equal(t, TokenBudgetConfig{Enabled: true, MaxTokens: 2_000_000, WarnRatio: 0.7, HardRatio: 1.0}, tb.cfg)
	noVision, err := BuildSubagentMiddlewares(Options{Config: DefaultConfig(), Model: visionModel{false}})
	require.NoError(t, err)
	assert.NotContains(t, Names(noVision), NameViewImage)
	// With summarization on: Summarization after DurableContext, before the date context,
	// and a 1 M budget.
	cfg := DefaultConfig()
	cfg.Summarization.Enabled = true
	withSum, err := BuildSubagentMiddlewares(Options{Config: cfg, Model: visionModel{false}})
	require.NoError(t, err)
	n := Names(withSum)
	assert.Equal(t, []string{NameSafetyFinishReason, NameDurableContext, NameSummarization, NameSubagentDateContext, NameSystemMessageCoalescing}, n[len(n)-5:])
	assert.Equal(t, int64(1_000_000), findMW[*TokenBudgetMiddleware](withSum).cfg.MaxTokens)
	_, err = agent.New(agent.Config{Name: "general-purpose", Model: model.Wrap(&scriptedProvider{}, model.Info{Name: "m"}), Middlewares: withSum})
	require.NoError(t, err)
}

// The subagent gets the date reminder on its task prompt (ID swap) and never the user's
// memory.
func TestSubagentDateContext(t *testing.T) {
	clock := newFakeClock()
	m := NewSubagentDateContextMiddleware(clock)
	task := message.Human("Collect three facts about Paris")
	u, err := m.BeforeAgent(context.Background(), &agent.Runtime{UserID: "alice", AgentName: "general-purpose"}, &state.State{Messages: []message.Message{task}})
	require.NoError(t, err)
	require.NotNil(t, u)
	require.Len(t, u.Messages, 2)
	assert.Equal(t, message.RoleSystem, u.Messages[0].Role)
	assert.Equal(t, DateReminder(clock.Now()), u.Messages[0].Content)
	assert.Equal(t, task.ID, u.Messages[0].ID)
	assert.Equal(t, task.ID+"__user", u.Messages[1].ID)
	assert.Equal(t, task.Content, u.Messages[1].Content)
}

func TestChainRunsInAgent(t *testing.T) {
	chain, err := BuildMiddlewares(allEnabled())
	require.NoError(t, err)
	_, err = agent.New(agent.Config{Model: model.Wrap(&scriptedProvider{}, model.Info{Name: "m"}), Middlewares: chain})
	require.NoError(t, err, "every middleware implements a hook and names are unique")
}

func findMW[T agent.Middleware](chain []agent.Middleware) T {
	var zero T
	for _, m := range chain {
		if t, ok := m.(T); ok {
			return t
		}
	}
	return zero
}

// test_build_middlewares_passes_subagent_total_limit_from_app_config and
// test_build_middlewares_allows_runtime_subagent_total_limit_override.
func TestChainSubagentLimitsFromConfigAndRuntime(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Settings.Subagent.MaxTotalPerRun = 7
	chain, err := BuildMiddlewares(Options{Config: cfg, SubagentEnabled: ptr(true), MaxConcurrentSubagents: 3})
	require.NoError(t, err)
	c, total := findMW[*SubagentLimitMiddleware](chain).Limits()
	assert.Equal(t, []int{3, 7}, []int{c, total})
	chain, err = BuildMiddlewares(Options{Config: cfg, MaxTotalSubagents: 5})
	require.NoError(t, err)
	_, total = findMW[*SubagentLimitMiddleware](chain).Limits()
	assert.Equal(t, 5, total, "the runtime override wins")
}

// test_build_middlewares_uses_loop_detection_config.
func TestChainLoopDetectionConfigPropagates(t *testing.T) {
	cfg := DefaultConfig()
	cfg.LoopDetection.WarnThreshold, cfg.LoopDetection.HardLimit = 7, 9
	cfg.LoopDetection.WindowSize, cfg.LoopDetection.MaxTrackedThreads = 30, 40
	chain, err := BuildMiddlewares(Options{Config: cfg})
	require.NoError(t, err)
	ld := findMW[*LoopDetectionMiddleware](chain)
	require.NotNil(t, ld)
	assert.Equal(t, []int{7, 9, 30, 40}, []int{ld.cfg.WarnThreshold, ld.cfg.HardLimit, ld.cfg.WindowSize, ld.cfg.MaxTrackedThreads})
	bad := DefaultConfig()
	bad.LoopDetection.HardLimit = 1
	_, err = BuildMiddlewares(Options{Config: bad})
	assert.ErrorContains(t, err, "loop_detection: hard_limit must be at least warn_threshold")
}
