package subagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// Type is a kind of subagent (DeerFlow's SubagentConfig).
type Type struct {
	Name         string
	Description  string
	SystemPrompt string
	// Tools names the tools this subagent may use, from Executor.Tools; empty means all
	// of them. The task tool is never given to a subagent (no nested dispatch).
	Tools []string
	// Model is the subagent's model; nil means Executor.Model.
	Model model.ChatModel
	// MaxTurns bounds the subagent's steps; 0 means Executor.MaxTurns.
	MaxTurns int
}

// BuiltinTypes are DeerFlow's two built-in subagents.
func BuiltinTypes() []Type {
	return []Type{
		{Name: "general-purpose", Description: "A capable agent for complex, multi-step research and work tasks.",
			SystemPrompt: "You are a general-purpose subagent. Complete the delegated task with the tools you have and answer with a concise result."},
		{Name: "bash", Description: "A command execution specialist for running shell commands.",
			SystemPrompt: "You are a bash subagent. Run the commands needed for the task and report the result.",
			Tools:        []string{"bash", "ls", "read_file", "write_file", "str_replace"}},
	}
}

// Terminal statuses of an execution (genai.Subagent*).
const (
	StatusCompleted      = genai.SubagentCompleted
	StatusFailed         = genai.SubagentFailed
	StatusCancelled      = genai.SubagentCancelled
	StatusTimedOut       = genai.SubagentTimedOut
	StatusPollingTimeout = genai.SubagentPollingTimeout
)

// Executor runs subagents. Safe for concurrent use. One Executor may serve every run of
// a lead agent: its concurrency limit is kept per lead run (Task.RunID), like DeerFlow's
// executor per run and its max_concurrent_subagents — one user's run never waits for
// another's subagents.
type Executor struct {
	types         map[string]Type
	order         []string
	model         model.ChatModel
	tools         []tool.Tool
	mws           func(Type) []agent.Middleware
	timeout       time.Duration
	grace         time.Duration
	maxTurns      int
	maxConcurrent int

	mu   sync.Mutex
	runs map[string]*runSlots // lead run id → its slots, while it has executions
}

// runSlots are one lead run's execution slots; users counts the executions holding or
// waiting for one (the entry is dropped at zero).
type runSlots struct {
	sem   chan struct{}
	users int
}

// slots returns the run's slots, counting the caller as a user.
func (e *Executor) slots(runID string) *runSlots {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs := e.runs[runID]
	if rs == nil {
		rs = &runSlots{sem: make(chan struct{}, e.maxConcurrent)}
		e.runs[runID] = rs
	}
	rs.users++
	return rs
}

// leave drops the caller from the run's users.
func (e *Executor) leave(runID string, rs *runSlots) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rs.users--
	if rs.users == 0 && e.runs[runID] == rs {
		delete(e.runs, runID)
	}
}

// activeRuns is how many lead runs currently hold slots (tests check nothing leaks).
func (e *Executor) activeRuns() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.runs)
}

// Options configure an Executor.
type Options struct {
	Types []Type          // default BuiltinTypes()
	Model model.ChatModel // default model of subagents (required)
	Tools []tool.Tool     // the tool pool subagents pick from
	// Middlewares returns the middleware chain of a subagent type (optional; wired by cmd).
	Middlewares func(Type) []agent.Middleware
	// MaxConcurrent bounds the executions of one lead run running at once (default 3);
	// the run's others wait. Different runs do not share the limit.
	MaxConcurrent int
	// Timeout bounds one execution (default 15 min); the subagent's context is cancelled
	// at the deadline and the outcome is timed_out.
	Timeout time.Duration
	// PollGrace is how long past Timeout the task tool still waits for a subagent that
	// ignores cancellation before returning polling_timed_out (default 60 s, DeerFlow's
	// (timeout+60) polling budget).
	PollGrace time.Duration
	// MaxTurns is the default step limit of a subagent (default 50).
	MaxTurns int
}

// NewExecutor validates the options.
func NewExecutor(o Options) (*Executor, error) {
	if o.Model == nil {
		return nil, errors.New("subagent executor: model is required")
	}
	if len(o.Types) == 0 {
		o.Types = BuiltinTypes()
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 3
	}
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Minute
	}
	if o.PollGrace <= 0 {
		o.PollGrace = 60 * time.Second
	}
	if o.MaxTurns <= 0 {
		o.MaxTurns = 50
	}
	e := &Executor{types: map[string]Type{}, model: o.Model, tools: o.Tools, mws: o.Middlewares,
		timeout: o.Timeout, grace: o.PollGrace, maxTurns: o.MaxTurns, maxConcurrent: o.MaxConcurrent,
		runs: map[string]*runSlots{}}
	names := map[string]bool{}
	for _, t := range o.Tools {
		names[t.Spec().Name] = true
	}
	for _, t := range o.Types {
		if t.Name == "" {
			return nil, errors.New("subagent executor: a type has no name")
		}
		if _, dup := e.types[t.Name]; dup {
			return nil, fmt.Errorf("subagent executor: type %q defined twice", t.Name)
		}
		for _, n := range t.Tools {
			if !names[n] {
				return nil, fmt.Errorf("subagent executor: type %q uses unknown tool %q", t.Name, n)
			}
		}
		e.types[t.Name] = t
		e.order = append(e.order, t.Name)
	}
	return e, nil
}

func (e *Executor) typeModel(t Type) model.ChatModel {
	if t.Model != nil {
		return t.Model
	}
	return e.model
}

// ModelName is the model id a subagent type runs on ("" for an unknown type).
func (e *Executor) ModelName(typeName string) string {
	t, ok := e.types[typeName]
	if !ok {
		return ""
	}
	return e.typeModel(t).Info().Model
}

// TypeNames lists the subagent types in definition order.
func (e *Executor) TypeNames() []string { return append([]string(nil), e.order...) }

// Task is one dispatch.
type Task struct {
	ToolCallID  string // the task call's id (correlation; gen_ai.tool.call.id)
	Description string
	Prompt      string
	Type        string
	MaxTurns    int // optional override (≤ the type's limit)
	ThreadID    string
	RunID       string
	UserID      string
	Sandbox     sandbox.Sandbox
	// OnModelCall, if set, is called after each model call of the subagent with the
	// cumulative usage records (task_running events).
	OnModelCall func(resp *model.Response, records []journal.UsageRecord)
}

// Outcome is the terminal result of one execution.
type Outcome struct {
	ExecutionID string
	Status      string
	Result      string
	Error       string
	StopReason  string
	ModelName   string
	Records     []journal.UsageRecord // the collector's final snapshot
}

// Execute runs one subagent to a terminal status and always returns an Outcome (never
// an error): failures are statuses. It returns at the latest Timeout + PollGrace after
// it started running, even if the subagent ignores cancellation (polling_timed_out).
func (e *Executor) Execute(ctx context.Context, task Task) Outcome {
	execID := model.NewCallID()
	typ, ok := e.types[task.Type]
	if !ok {
		return Outcome{ExecutionID: execID, Status: StatusFailed,
			Error: fmt.Sprintf("unknown subagent type %q (available: %v)", task.Type, e.order)}
	}
	collector := journal.NewTokenCollector(genai.SubagentCaller(typ.Name))
	out := Outcome{ExecutionID: execID}
	m := e.typeModel(typ)
	out.ModelName = m.Info().Model

	// Concurrency limit of the lead run: wait for a slot, or give up when the parent is
	// cancelled.
	rs := e.slots(task.RunID)
	select {
	case rs.sem <- struct{}{}:
	case <-ctx.Done():
		e.leave(task.RunID, rs)
		out.Status, out.Error = StatusCancelled, "cancelled before start"
		return out
	}
	release := sync.OnceFunc(func() {
		<-rs.sem
		e.leave(task.RunID, rs)
	})

	a, err := e.build(typ, m, task.MaxTurns)
	if err != nil {
		release()
		out.Status, out.Error = StatusFailed, err.Error()
		return out
	}
	runCtx, cancel := context.WithTimeout(ctx, e.timeout)
	runCtx = model.IsolateObservers(runCtx, observer{collector: collector, onCall: task.OnModelCall})
	type result struct {
		res *agent.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer release()
		res, err := a.Run(runCtx, agent.Input{
			ThreadID: task.ThreadID, RunID: task.RunID, UserID: task.UserID,
			Messages: []message.Message{message.Human(task.Prompt)},
			Sandbox:  task.Sandbox, AgentID: execID, ToolCallID: task.ToolCallID,
		})
		release() // before the answer: a caller that got its result finds the slot free
		done <- result{res, err}
	}()
	poll := time.NewTimer(e.timeout + e.grace)
	defer poll.Stop()
	var r result
	select {
	case r = <-done:
		cancel()
	case <-poll.C:
		// The subagent ignored cancellation past its budget: report what we have and
		// leave it cancelled; its late usage is not reported (DeerFlow does the same).
		cancel()
		out.Status = StatusPollingTimeout
		out.Error = fmt.Sprintf("Task polling timed out after %d minutes. This may indicate the background task is stuck. Status: running", int(e.timeout.Minutes()))
		out.Records = collector.Snapshot()
		return out
	}
	out.Records = collector.Snapshot()
	if r.res != nil {
		out.Result = r.res.Answer
		out.StopReason = r.res.StopReason
	}
	switch {
	case r.err == nil:
		out.Status = StatusCompleted
	case ctx.Err() != nil:
		out.Status, out.Error = StatusCancelled, r.err.Error()
	case errors.Is(r.err, context.DeadlineExceeded) || runCtx.Err() == context.DeadlineExceeded:
		out.Status, out.Error = StatusTimedOut, fmt.Sprintf("subagent exceeded its %s timeout", e.timeout)
	case errors.Is(r.err, agent.ErrRecursionLimit):
		out.Status, out.Error, out.StopReason = StatusFailed, r.err.Error(), agent.StopTurnCapped
	default:
		out.Status, out.Error = StatusFailed, r.err.Error()
	}
	return out
}

func (e *Executor) build(t Type, m model.ChatModel, maxTurns int) (*agent.Agent, error) {
	allowed := map[string]bool{}
	for _, n := range t.Tools {
		allowed[n] = true
	}
	var tools []tool.Tool
	for _, tl := range e.tools {
		name := tl.Spec().Name
		if name == genai.TaskToolName || (len(allowed) > 0 && !allowed[name]) {
			continue
		}
		tools = append(tools, tl)
	}
	limit := t.MaxTurns
	if limit <= 0 {
		limit = e.maxTurns
	}
	if maxTurns > 0 && maxTurns < limit {
		limit = maxTurns
	}
	var mws []agent.Middleware
	if e.mws != nil {
		mws = e.mws(t)
	}
	return agent.New(agent.Config{Name: t.Name, Model: m, Tools: tools, Middlewares: mws,
		SystemPrompt: t.SystemPrompt, RecursionLimit: limit})
}

// observer feeds a subagent's model calls to its collector.
type observer struct {
	collector *journal.TokenCollector
	onCall    func(*model.Response, []journal.UsageRecord)
}

func (o observer) ObserveModelCall(_ context.Context, rec model.CallRecord) {
	if rec.Response == nil {
		return
	}
	msg := rec.Response.Message
	o.collector.OnLLMEnd(rec.CallID, []*message.Message{&msg})
	if o.onCall != nil {
		o.onCall(rec.Response, o.collector.Snapshot())
	}
}
