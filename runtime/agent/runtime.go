package agent

import (
	"maps"
	"sync"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
)

// Stop reasons written to the run context by guard middlewares (DeerFlow's stop reasons). A run
// that stops for one of them still finishes with status success.
const (
	StopLoopCapped        = "loop_capped"
	StopTokenCapped       = "token_capped"
	StopSafetyCapped      = "safety_capped"
	StopSubagentLimit     = "subagent_limit_capped"
	StopModelLengthCapped = "model_length_capped"
	StopTurnCapped        = "turn_capped"
)

// Runtime is the per-run environment hooks and tools see (LangGraph's runtime). It is
// created by Agent.Run; fields are set before the first hook and never change during the
// run, except Context, which is the mutable, concurrency-safe part.
type Runtime struct {
	ThreadID  string
	RunID     string
	UserID    string
	AgentName string // "lead_agent" or the subagent's name
	AgentID   string // execution id (gen_ai.agent.id)
	Caller    string // caller tag of this agent's own model calls
	// Model is the agent's model; Models resolves other configured models by name (for
	// middlewares with their own model, e.g. the title model); may be nil.
	Model  model.ChatModel
	Models *model.Factory
	// Journal is the run journal of the lead agent; nil in subagents (they report through
	// their token collector) and when the caller did not supply one.
	Journal *journal.RunJournal
	// Sandbox confines file and shell tools; may be nil.
	Sandbox sandbox.Sandbox
	// Context is the mutable run context (stop_reason and free-form values).
	Context *RunContext
	// Emit sends custom stream events (task_started, ...); may be nil.
	Emit func(event string, payload map[string]any)
}

// RunContext is DeerFlow's runtime.context: a mutable map shared by hooks and tools of
// one run, plus the stop reason. Safe for concurrent use.
type RunContext struct {
	mu         sync.Mutex
	stopReason string
	values     map[string]any
}

// NewRunContext returns an empty run context.
func NewRunContext() *RunContext { return &RunContext{values: map[string]any{}} }

// SetStopReason records why a guard stopped the run (overwrites).
func (c *RunContext) SetStopReason(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopReason = reason
}

// SetStopReasonIfEmpty records reason only when none is set (ModelLengthFinishReason
// never overwrites an existing value). It reports whether it was set.
func (c *RunContext) SetStopReasonIfEmpty(reason string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopReason != "" {
		return false
	}
	c.stopReason = reason
	return true
}

// StopReason returns the recorded stop reason ("" when none).
func (c *RunContext) StopReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopReason
}

// Set stores a value; Get reads it.
func (c *RunContext) Set(key string, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values[key] = v
}

// Get returns the value stored under key.
func (c *RunContext) Get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.values[key]
	return v, ok
}

// Values returns a copy of all values.
func (c *RunContext) Values() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.values)
}
