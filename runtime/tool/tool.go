// Package tool defines the Tool interface of the agent runtime and the built-in tools:
// write_todos, ask_clarification, the sandboxed file and shell tools (bash, ls,
// read_file, write_file, str_replace), web_search behind a SearchProvider, view_image and
// present_files. The task tool (subagent dispatch) lives in runtime/subagent, which
// implements this same interface.
//
// # Contract
//
//   - Spec is constant for the tool's lifetime; Parameters is a JSON Schema object the
//     model sees and ValidateArgs enforces (required keys, types, enums) before Call.
//   - Call runs one invocation. It may be called concurrently with itself and with other
//     tools (the tool node runs a response's tool calls in parallel) and must honour ctx
//     cancellation. It must not mutate call.Args or call.Env.State.
//   - A failure the model should see (bad path, command exit status, missing file) is a
//     Result with Status error, or an error: the agent turns an error into an error
//     ToolMessage after the wrap_tool_call chain has seen it. *ArgError marks argument
//     validation failures ("Error: invalid arguments for <tool>: <field>: <reason>").
//   - State changes go in Result.Update (write_todos sets todos, present_files adds
//     artifacts, ask_clarification jumps to the end); the loop applies the updates of one
//     response's calls in tool-call order after all of them finished.
package tool

import (
	"context"
	"fmt"

	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/state"
)

// Spec describes a tool to the model.
type Spec struct {
	Name        string
	Description string
	Parameters  map[string]any // JSON Schema, type object
}

// Tool is one callable tool.
type Tool interface {
	Spec() Spec
	Call(ctx context.Context, call Call) (Result, error)
}

// Call is one invocation.
type Call struct {
	ID   string         // provider tool-call id
	Name string         // tool name as called
	Args map[string]any // validated arguments; read-only
	Env  *Env
}

// Env is the run environment a tool sees. Fields may be nil/empty when the agent runs
// without them (e.g. no sandbox configured); tools that need one return an error then.
type Env struct {
	ThreadID  string
	RunID     string
	UserID    string
	AgentName string
	// State is the state when the tool node started; read-only.
	State *state.State
	// Sandbox confines file and shell tools.
	Sandbox sandbox.Sandbox
	// Usage is the parent run's usage recorder (the RunJournal), nil for subagents.
	Usage journal.UsageRecorder
	// Emit sends a custom stream event (task_started, task_running, ...); may be nil.
	Emit func(event string, payload map[string]any)
}

// EmitEvent calls Env.Emit when set.
func (e *Env) EmitEvent(event string, payload map[string]any) {
	if e != nil && e.Emit != nil {
		e.Emit(event, payload)
	}
}

// Result is the outcome of one invocation; the agent builds the ToolMessage from it.
type Result struct {
	Content          string
	Status           message.ToolStatus // "" means success
	AdditionalKwargs map[string]any
	Update           *state.Update
	// Attributes are extra span attributes for the execute_tool span (e.g. the task tool's
	// agentmeter.subagent.status), as key/value pairs of string values.
	Attributes map[string]string
}

// ArgError is an argument validation failure.
type ArgError struct {
	Tool   string
	Field  string
	Reason string
}

func (e *ArgError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("invalid arguments for %s: %s", e.Tool, e.Reason)
	}
	return fmt.Sprintf("invalid arguments for %s: %s: %s", e.Tool, e.Field, e.Reason)
}

// Registry is an ordered set of tools by name.
type Registry struct {
	order []string
	tools map[string]Tool
}

// NewRegistry returns a registry holding tools; duplicate names are an error.
func NewRegistry(tools ...Tool) (*Registry, error) {
	r := &Registry{tools: map[string]Tool{}}
	for _, t := range tools {
		if err := r.Add(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add registers t.
func (r *Registry) Add(t Tool) error {
	name := t.Spec().Name
	if name == "" {
		return fmt.Errorf("tool: empty name")
	}
	if _, dup := r.tools[name]; dup {
		return fmt.Errorf("tool %q registered twice", name)
	}
	r.tools[name] = t
	r.order = append(r.order, name)
	return nil
}

// Get returns the tool called name.
func (r *Registry) Get(name string) (Tool, bool) {
	if r == nil {
		return nil, false
	}
	t, ok := r.tools[name]
	return t, ok
}

// All returns the tools in registration order.
func (r *Registry) All() []Tool {
	if r == nil {
		return nil
	}
	out := make([]Tool, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.tools[n])
	}
	return out
}
