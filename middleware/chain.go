package middleware

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/model"
)

// DeerFlow class names, used as Name() and in ordering checks.
const (
	NameInputSanitization       = "InputSanitizationMiddleware"
	NameToolOutputBudget        = "ToolOutputBudgetMiddleware"
	NameToolResultSanitization  = "ToolResultSanitizationMiddleware"
	NameSandboxAudit            = "SandboxAuditMiddleware"
	NameReadBeforeWrite         = "ReadBeforeWriteMiddleware"
	NameThreadData              = "ThreadDataMiddleware"
	NameUploads                 = "UploadsMiddleware"
	NameSandbox                 = "SandboxMiddleware"
	NameDanglingToolCall        = "DanglingToolCallMiddleware"
	NameLLMErrorHandling        = "LLMErrorHandlingMiddleware"
	NameGuardrail               = "GuardrailMiddleware"
	NameToolErrorHandling       = "ToolErrorHandlingMiddleware"
	NameDurableContext          = "DurableContextMiddleware"
	NameToolProgress            = "ToolProgressMiddleware"
	NameDynamicContext          = "DynamicContextMiddleware"
	NameSummarization           = "SummarizationMiddleware"
	NameTodo                    = "TodoMiddleware"
	NameTokenUsage              = "TokenUsageMiddleware"
	NameTitle                   = "TitleMiddleware"
	NameMemory                  = "MemoryMiddleware"
	NameViewImage               = "ViewImageMiddleware"
	NameSystemMessageCoalescing = "SystemMessageCoalescingMiddleware"
	NameSubagentLimit           = "SubagentLimitMiddleware"
	NameLoopDetection           = "LoopDetectionMiddleware"
	NameTokenBudget             = "TokenBudgetMiddleware"
	NameThreadBudget            = "ThreadBudgetMiddleware"
	NameTerminalResponse        = "TerminalResponseMiddleware"
	NameModelLengthFinishReason = "ModelLengthFinishReasonMiddleware"
	NameSafetyFinishReason      = "SafetyFinishReasonMiddleware"
	NameClarification           = "ClarificationMiddleware"
)

// Options configure chain assembly. Zero values take the defaults of Config.
type Options struct {
	// Config holds every middleware section (ConfigFrom(loaded config)).
	Config Config
	// Model is the run's resolved model: its Info decides ViewImage (supports_vision) and
	// it is the default title/summary model. May be nil (then title falls back locally).
	Model model.ChatModel
	// Models resolves title.model_name, summarization.model_name and memory.model_name.
	Models *model.Factory
	// PlanMode and SubagentEnabled are DeerFlow's runtime options is_plan_mode and
	// subagent_enabled; nil takes settings.plan_mode.enabled / settings.subagent.enabled.
	PlanMode        *bool
	SubagentEnabled *bool
	// MaxConcurrentSubagents and MaxTotalSubagents override settings.subagent (runtime
	// options max_concurrent_subagents / max_total_subagents); 0 = use the settings.
	MaxConcurrentSubagents int
	MaxTotalSubagents      int
	// Custom are programmatic custom middlewares, placed after the lead phase and before
	// the configured extensions and the fixed tail.
	Custom []agent.Middleware
	// Clock is the time source (default SystemClock).
	Clock Clock
	// SandboxProvider acquires thread sandboxes (default: local, under settings.runtime.base_dir).
	SandboxProvider SandboxProvider
	// GuardrailProvider overrides the provider named by guardrails.provider.
	GuardrailProvider GuardrailProvider
	// MemoryStore keeps per-user memory (default: files under settings.runtime.base_dir).
	MemoryStore MemoryStore
}

func (o *Options) clock() Clock {
	if o.Clock == nil {
		return SystemClock{}
	}
	return o.Clock
}

func (o *Options) planMode() bool {
	if o.PlanMode != nil {
		return *o.PlanMode
	}
	return o.Config.Settings.PlanMode.Enabled
}

func (o *Options) subagentEnabled() bool {
	if o.SubagentEnabled != nil {
		return *o.SubagentEnabled
	}
	return o.Config.Settings.Subagent.Enabled
}

func (o *Options) supportsVision() bool {
	return o.Model != nil && o.Model.Info().SupportsVision
}

// BuildRuntimeMiddlewares is the runtime-shared phase of the lead agent
// (build_lead_runtime_middlewares, DeerFlow's runtime-shared phase): InputSanitization,
// ToolOutputBudget, ToolResultSanitization, ThreadData, Uploads, Sandbox, DanglingToolCall,
// LLMErrorHandling, Guardrail (when enabled), SandboxAudit, ReadBeforeWrite (when
// enabled), ToolProgress (opt-in), ToolErrorHandling.
func BuildRuntimeMiddlewares(o Options) ([]agent.Middleware, error) {
	return buildRuntime(o, true)
}

func buildRuntime(o Options, lead bool) ([]agent.Middleware, error) {
	cfg := o.Config
	out := []agent.Middleware{
		NewInputSanitizationMiddleware(),
		NewToolOutputBudgetMiddleware(cfg.ToolOutput),
		NewToolResultSanitizationMiddleware(),
		NewThreadDataMiddleware(cfg.Settings.Runtime),
	}
	if lead {
		out = append(out, NewUploadsMiddleware())
	}
	sp := o.SandboxProvider
	if sp == nil {
		sp = NewLocalSandboxProvider(cfg.Settings.Runtime)
	}
	out = append(out,
		NewSandboxMiddleware(sp, cfg.Settings.Sandbox.LazyInit),
		NewDanglingToolCallMiddleware(),
	)
	llm, err := NewLLMErrorHandlingMiddleware(cfg.CircuitBreaker, o.clock())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SectionCircuitBreaker, err)
	}
	out = append(out, llm)
	if cfg.Guardrails.Enabled && (cfg.Guardrails.Provider != "" || o.GuardrailProvider != nil) {
		p := o.GuardrailProvider
		if p == nil {
			if p, err = NewGuardrailProvider(cfg.Guardrails); err != nil {
				return nil, fmt.Errorf("%s: %w", SectionGuardrails, err)
			}
		}
		out = append(out, NewGuardrailMiddleware(p, cfg.Guardrails.FailClosed))
	}
	out = append(out, NewSandboxAuditMiddleware())
	if cfg.ReadBeforeWrite.Enabled {
		out = append(out, NewReadBeforeWriteMiddleware())
	}
	if cfg.ToolProgress.Enabled {
		tp, err := NewToolProgressMiddleware(cfg.ToolProgress)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SectionToolProgress, err)
		}
		out = append(out, tp)
	}
	out = append(out, NewToolErrorHandlingMiddleware())
	return out, nil
}

// BuildLeadMiddlewares is DeerFlow's lead-agent phase, in DeerFlow's order:
// DynamicContext, DurableContext, Summarization, Todo, TokenUsage, Title, Memory, ViewImage,
// SystemMessageCoalescing, SubagentLimit, LoopDetection, TokenBudget — each only under
// its condition.
func BuildLeadMiddlewares(o Options) ([]agent.Middleware, error) {
	cfg := o.Config
	store := o.MemoryStore
	if store == nil {
		store = NewFileMemoryStore(cfg.Settings.Runtime)
	}
	out := []agent.Middleware{NewDynamicContextMiddleware(o.clock(), store, cfg.Settings.Memory), NewDurableContextMiddleware()}
	if cfg.Summarization.Enabled {
		s, err := NewSummarizationMiddleware(cfg.Summarization, o.Models)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SectionSummarization, err)
		}
		out = append(out, s)
	}
	if o.planMode() {
		out = append(out, NewTodoMiddleware(cfg.Settings.PlanMode))
	}
	if cfg.TokenUsage.Enabled {
		out = append(out, NewTokenUsageMiddleware())
	}
	title, err := NewTitleMiddleware(cfg.Title, o.Models)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SectionTitle, err)
	}
	out = append(out, title)
	mem, err := NewMemoryMiddleware(cfg.Settings.Memory, store, o.Models)
	if err != nil {
		return nil, fmt.Errorf("%s.memory: %w", SectionSettings, err)
	}
	out = append(out, mem)
	if o.supportsVision() {
		out = append(out, NewViewImageMiddleware())
	}
	out = append(out, NewSystemMessageCoalescingMiddleware())
	if o.subagentEnabled() {
		sc := cfg.Settings.Subagent
		if o.MaxConcurrentSubagents > 0 {
			sc.MaxConcurrent = o.MaxConcurrentSubagents
		}
		if o.MaxTotalSubagents > 0 {
			sc.MaxTotalPerRun = o.MaxTotalSubagents
		}
		out = append(out, NewSubagentLimitMiddleware(sc.MaxConcurrent, sc.MaxTotalPerRun))
	}
	if cfg.LoopDetection.Enabled {
		ld, err := NewLoopDetectionMiddleware(cfg.LoopDetection)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SectionLoopDetection, err)
		}
		out = append(out, ld)
	}
	if cfg.TokenBudget.Enabled {
		tb, err := NewTokenBudgetMiddleware(cfg.TokenBudget)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SectionTokenBudget, err)
		}
		out = append(out, tb)
	}
	// the thread budget (agentmeter's own, off by default) counts the whole agent tree
	if cfg.ThreadBudget.Enabled {
		b, err := NewThreadBudgetMiddleware(cfg.ThreadBudget)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SectionThreadBudget, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// BuildTail is the fixed tail: TerminalResponse, ModelLengthFinishReason,
// SafetyFinishReason (when enabled) and Clarification, always last.
func BuildTail(o Options) []agent.Middleware {
	out := []agent.Middleware{NewTerminalResponseMiddleware(), NewModelLengthFinishReasonMiddleware()}
	if o.Config.SafetyFinishReason.Enabled {
		out = append(out, NewSafetyFinishReasonMiddleware(o.Config.SafetyFinishReason))
	}
	return append(out, NewClarificationMiddleware())
}

// BuildMiddlewares assembles the whole lead chain: runtime-shared phase + lead phase +
// programmatic custom middlewares + configured extensions + fixed tail, then checks the
// ordering invariants (DeerFlow's chain assembly and order).
func BuildMiddlewares(o Options) ([]agent.Middleware, error) {
	shared, err := BuildRuntimeMiddlewares(o)
	if err != nil {
		return nil, err
	}
	lead, err := BuildLeadMiddlewares(o)
	if err != nil {
		return nil, err
	}
	ext, err := buildExtensions(o.Config.Extensions)
	if err != nil {
		return nil, err
	}
	chain := slices.Concat(shared, lead, o.Custom, ext, BuildTail(o))
	if err := AssertOrdering(chain); err != nil {
		return nil, err
	}
	return chain, nil
}

// BuildSubagentMiddlewares is the subagent chain (DeerFlow's subagent chain, without the
// features agentmeter does not have): the shared phase without Uploads, ViewImage for
// vision models, LoopDetection (when enabled), TokenBudget (the subagent budget, on by
// default), configured extensions, SafetyFinishReason, DurableContext, Summarization (the
// lead's switch), SubagentDateContext, SystemMessageCoalescing. No Title, Memory,
// TokenUsage, SubagentLimit, Clarification, Todo, TerminalResponse or DynamicContext.
// DeerFlow registers DurableContext after SafetyFinishReason here; a subagent has no task
// tool, so its after_model ledger capture never sees a call Safety would strip. The lead
// chain's AssertOrdering invariants are therefore not asserted on this chain.
func BuildSubagentMiddlewares(o Options) ([]agent.Middleware, error) {
	out, err := buildRuntime(o, false)
	if err != nil {
		return nil, err
	}
	if o.supportsVision() {
		out = append(out, NewViewImageMiddleware())
	}
	if o.Config.LoopDetection.Enabled {
		ld, err := NewLoopDetectionMiddleware(o.Config.LoopDetection)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SectionLoopDetection, err)
		}
		ld.perAgent = true
		out = append(out, ld)
	}
	tb, err := NewTokenBudgetMiddleware(SubagentTokenBudget(o.Config.Summarization.Enabled))
	if err != nil {
		return nil, fmt.Errorf("subagent token budget: %w", err)
	}
	out = append(out, tb)
	ext, err := buildExtensions(o.Config.Extensions)
	if err != nil {
		return nil, err
	}
	out = append(out, ext...)
	if o.Config.SafetyFinishReason.Enabled {
		out = append(out, NewSafetyFinishReasonMiddleware(o.Config.SafetyFinishReason))
	}
	out = append(out, NewDurableContextMiddleware())
	if o.Config.Summarization.Enabled {
		s, err := NewSummarizationMiddleware(o.Config.Summarization, o.Models)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", SectionSummarization, err)
		}
		out = append(out, s)
	}
	out = append(out, NewSubagentDateContextMiddleware(o.clock()), NewSystemMessageCoalescingMiddleware())
	return out, nil
}

// SubagentTokenBudget is DeerFlow's subagent budget (enabled by default): 1 M tokens per
// execution when summarization is enabled, else 2 M, warning at 70 %.
func SubagentTokenBudget(summarization bool) TokenBudgetConfig {
	c := TokenBudgetConfig{Enabled: true, MaxTokens: 2_000_000, WarnRatio: 0.7, HardRatio: 1.0}
	if summarization {
		c.MaxTokens = 1_000_000
	}
	return c
}

// OrderingError names the violated invariant.
type OrderingError struct {
	Constraint string
	Detail     string
}

func (e *OrderingError) Error() string {
	return fmt.Sprintf("middleware ordering: %s: %s", e.Constraint, e.Detail)
}

// AssertOrdering checks the ordering invariants of a chain (DeerFlow's per-hook order, Safety and Clarification last, and
// deerflow/extensions/ordering.py), whatever custom or extension middlewares were inserted:
//   - names are unique;
//   - ThreadData < Uploads < Sandbox (paths before uploads before the sandbox);
//   - DanglingToolCall < LLMErrorHandling (retries see the patched history);
//   - Guardrail < ToolErrorHandling (a guardrail denial is not an exception);
//   - ToolProgress < ToolErrorHandling (DeerFlow's declarative ordering constraint);
//   - SafetyFinishReason is the last middleware with an after_model hook, so with reverse
//     dispatch it sees every response first (before LoopDetection, TokenBudget,
//     SubagentLimit, TokenUsage, custom middlewares);
//   - ClarificationMiddleware is last (innermost tool wrapper).
func AssertOrdering(chain []agent.Middleware) error {
	idx := map[string]int{}
	for i, m := range chain {
		if m == nil {
			return &OrderingError{"no nil middleware", fmt.Sprintf("entry %d is nil", i)}
		}
		if _, dup := idx[m.Name()]; dup {
			return &OrderingError{"unique names", fmt.Sprintf("%s appears twice", m.Name())}
		}
		idx[m.Name()] = i
	}
	before := func(outer, inner string) error {
		o, okO := idx[outer]
		in, okI := idx[inner]
		if okO && okI && o > in {
			return &OrderingError{outer + " before " + inner, fmt.Sprintf("%s is at %d, %s at %d", outer, o, inner, in)}
		}
		return nil
	}
	var errs []error
	for _, pair := range [][2]string{
		{NameInputSanitization, NameThreadData}, {NameToolOutputBudget, NameToolResultSanitization},
		{NameToolResultSanitization, NameSandbox}, {NameSandbox, NameSandboxAudit}, {NameSandboxAudit, NameReadBeforeWrite},
		{NameReadBeforeWrite, NameToolErrorHandling}, {NameGuardrail, NameSandboxAudit},
		{NameToolProgress, NameToolErrorHandling}, {NameReadBeforeWrite, NameToolProgress},
		{NameThreadData, NameUploads}, {NameThreadData, NameSandbox}, {NameUploads, NameSandbox},
		{NameDanglingToolCall, NameLLMErrorHandling}, {NameGuardrail, NameToolErrorHandling},
		{NameDurableContext, NameSummarization}, {NameDurableContext, NameSubagentLimit},
	} {
		if err := before(pair[0], pair[1]); err != nil {
			errs = append(errs, err)
		}
	}
	if s, ok := idx[NameSafetyFinishReason]; ok {
		for i := s + 1; i < len(chain); i++ {
			if _, am := chain[i].(agent.AfterModelHook); am {
				errs = append(errs, &OrderingError{NameSafetyFinishReason + " sees responses first",
					fmt.Sprintf("%s (at %d) has an after_model hook and is registered after %s (at %d)", chain[i].Name(), i, NameSafetyFinishReason, s)})
			}
		}
	}
	if c, ok := idx[NameClarification]; ok && c != len(chain)-1 {
		errs = append(errs, &OrderingError{NameClarification + " last", fmt.Sprintf("it is at %d of %d; %s follows it", c, len(chain), chain[len(chain)-1].Name())})
	}
	return errors.Join(errs...)
}

// HookOrder is the per-hook execution order of a chain (the `agentmeter chain` JSON).
type HookOrder struct {
	BeforeAgent   []string `json:"before_agent"`
	BeforeModel   []string `json:"before_model"`
	WrapModelCall []string `json:"wrap_model_call"`
	AfterModel    []string `json:"after_model"`
	WrapToolCall  []string `json:"wrap_tool_call"`
	AfterAgent    []string `json:"after_agent"`
}

// Hooks reports, per hook, the order in which the middlewares of chain run under the
// runtime/agent semantics: list order for before_*, outermost first for wrap_*, reverse
// list order for after_*.
func Hooks(chain []agent.Middleware) HookOrder {
	h := HookOrder{BeforeAgent: []string{}, BeforeModel: []string{}, WrapModelCall: []string{},
		AfterModel: []string{}, WrapToolCall: []string{}, AfterAgent: []string{}}
	for _, m := range chain {
		n := m.Name()
		if _, ok := m.(agent.BeforeAgentHook); ok {
			h.BeforeAgent = append(h.BeforeAgent, n)
		}
		if _, ok := m.(agent.BeforeModelHook); ok {
			h.BeforeModel = append(h.BeforeModel, n)
		}
		if _, ok := m.(agent.WrapModelCallHook); ok {
			h.WrapModelCall = append(h.WrapModelCall, n)
		}
		if _, ok := m.(agent.AfterModelHook); ok {
			h.AfterModel = append(h.AfterModel, n)
		}
		if _, ok := m.(agent.WrapToolCallHook); ok {
			h.WrapToolCall = append(h.WrapToolCall, n)
		}
		if _, ok := m.(agent.AfterAgentHook); ok {
			h.AfterAgent = append(h.AfterAgent, n)
		}
	}
	slices.Reverse(h.AfterModel)
	slices.Reverse(h.AfterAgent)
	return h
}

// Names returns the chain's names in list order.
func Names(chain []agent.Middleware) []string {
	out := make([]string, len(chain))
	for i, m := range chain {
		out[i] = m.Name()
	}
	return out
}

// ExtensionFactory builds one configured extension middleware (DeerFlow's zero-argument
// extension classes).
type ExtensionFactory func() (agent.Middleware, error)

var (
	extMu      sync.RWMutex
	extensions = map[string]ExtensionFactory{}
)

// RegisterExtension makes a middleware available to extensions.middlewares under name.
// Registering a name twice panics (a programming error).
func RegisterExtension(name string, f ExtensionFactory) {
	extMu.Lock()
	defer extMu.Unlock()
	if _, dup := extensions[name]; dup {
		panic(fmt.Sprintf("middleware: extension %q registered twice", name))
	}
	extensions[name] = f
}

func lookupExtension(name string) (ExtensionFactory, bool) {
	extMu.RLock()
	defer extMu.RUnlock()
	f, ok := extensions[name]
	return f, ok
}

// ExtensionNames lists the registered extensions, sorted.
func ExtensionNames() []string {
	extMu.RLock()
	defer extMu.RUnlock()
	names := slices.Sorted(maps.Keys(extensions))
	return names
}

// buildExtensions instantiates extensions.middlewares; any bad entry fails the build
// loudly (DeerFlow: bad configured middleware entries fail agent construction).
func buildExtensions(c ExtensionsConfig) ([]agent.Middleware, error) {
	var out []agent.Middleware
	for i, name := range c.Middlewares {
		f, ok := lookupExtension(name)
		if !ok {
			return nil, fmt.Errorf("extensions.middlewares[%d]: %q is not a registered extension middleware (registered: %s)", i, name, strings.Join(ExtensionNames(), ", "))
		}
		m, err := f()
		if err != nil {
			return nil, fmt.Errorf("extensions.middlewares[%d] %q: %w", i, name, err)
		}
		if m == nil {
			return nil, fmt.Errorf("extensions.middlewares[%d] %q: factory returned no middleware", i, name)
		}
		out = append(out, m)
	}
	return out, nil
}
