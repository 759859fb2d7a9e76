package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/sandbox"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// DefaultRecursionLimit is LangGraph's default recursion_limit... raised to DeerFlow's 100.
const DefaultRecursionLimit = 100

// ErrRecursionLimit is returned when a run takes more steps than Config.RecursionLimit
// (LangGraph's GraphRecursionError).
var ErrRecursionLimit = errors.New("agent: recursion limit reached")

// Config builds an Agent.
type Config struct {
	// Name is gen_ai.agent.name: "lead_agent" (default) or the subagent's name.
	Name string
	// Model is the agent's model (a traced model from the model factory). Required.
	Model model.ChatModel
	// Models resolves other configured models for middlewares; optional.
	Models *model.Factory
	// Tools the model may call.
	Tools []tool.Tool
	// Middlewares in chain order (see the package comment for hook order).
	Middlewares []Middleware
	// SystemPrompt is sent as the first message of every model call (not stored in state).
	SystemPrompt string
	// RecursionLimit bounds the steps (model calls + tool batches) of one run; 0 = 100.
	RecursionLimit int
	// ToolConcurrency bounds parallel tool calls of one response; 0 = unbounded.
	ToolConcurrency int
}

// Agent is a configured, reusable agent; Run may be called concurrently.
type Agent struct {
	cfg         Config
	tools       *tool.Registry
	specs       []model.ToolSpec
	beforeAgent []namedHook[BeforeAgentHook]
	beforeModel []namedHook[BeforeModelHook]
	afterModel  []namedHook[AfterModelHook] // already reversed
	afterAgent  []namedHook[AfterAgentHook] // already reversed
	modelChain  ModelHandler
	toolChain   ToolHandler
}

type namedHook[H any] struct {
	name string
	hook H
}

// New validates the config and composes the hook chains once.
func New(cfg Config) (*Agent, error) {
	if cfg.Model == nil {
		return nil, errors.New("agent: model is required")
	}
	if cfg.Name == "" {
		cfg.Name = genai.LeadAgentName
	}
	if cfg.RecursionLimit <= 0 {
		cfg.RecursionLimit = DefaultRecursionLimit
	}
	reg, err := tool.NewRegistry(cfg.Tools...)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.Name, err)
	}
	a := &Agent{cfg: cfg, tools: reg}
	for _, t := range reg.All() {
		s := t.Spec()
		a.specs = append(a.specs, model.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	seen := map[string]bool{}
	var wrapModel []WrapModelCallHook
	var wrapTool []WrapToolCallHook
	for i, m := range cfg.Middlewares {
		if m == nil {
			return nil, fmt.Errorf("agent %s: middleware %d is nil", cfg.Name, i)
		}
		name := m.Name()
		if seen[name] {
			return nil, fmt.Errorf("agent %s: middleware %q appears twice", cfg.Name, name)
		}
		seen[name] = true
		hooks := 0
		if h, ok := m.(BeforeAgentHook); ok {
			a.beforeAgent = append(a.beforeAgent, namedHook[BeforeAgentHook]{name, h})
			hooks++
		}
		if h, ok := m.(BeforeModelHook); ok {
			a.beforeModel = append(a.beforeModel, namedHook[BeforeModelHook]{name, h})
			hooks++
		}
		if h, ok := m.(AfterModelHook); ok {
			a.afterModel = append(a.afterModel, namedHook[AfterModelHook]{name, h})
			hooks++
		}
		if h, ok := m.(AfterAgentHook); ok {
			a.afterAgent = append(a.afterAgent, namedHook[AfterAgentHook]{name, h})
			hooks++
		}
		if h, ok := m.(WrapModelCallHook); ok {
			wrapModel = append(wrapModel, h)
			hooks++
		}
		if h, ok := m.(WrapToolCallHook); ok {
			wrapTool = append(wrapTool, h)
			hooks++
		}
		if hooks == 0 {
			return nil, fmt.Errorf("agent %s: middleware %q implements no hook", cfg.Name, name)
		}
	}
	// after_model and after_agent run in reverse list order (DeerFlow's hook execution model).
	slices.Reverse(a.afterModel)
	slices.Reverse(a.afterAgent)
	// Compose wrappers so index 0 is outermost: wrap from the innermost outwards.
	a.modelChain = callModel
	for i := len(wrapModel) - 1; i >= 0; i-- {
		h, next := wrapModel[i], a.modelChain
		a.modelChain = func(ctx context.Context, req *ModelRequest) (*ModelResponse, error) {
			return h.WrapModelCall(ctx, req, next)
		}
	}
	a.toolChain = a.callTool
	for i := len(wrapTool) - 1; i >= 0; i-- {
		h, next := wrapTool[i], a.toolChain
		a.toolChain = func(ctx context.Context, req *ToolRequest) (*ToolResponse, error) {
			return h.WrapToolCall(ctx, req, next)
		}
	}
	return a, nil
}

// Name is the agent's name.
func (a *Agent) Name() string { return a.cfg.Name }

// Tools returns the agent's tool registry.
func (a *Agent) Tools() *tool.Registry { return a.tools }

// Input is one run of the agent.
type Input struct {
	ThreadID, RunID, UserID string
	// Messages are appended to the state before the run (normally the human prompt).
	Messages []message.Message
	// State is the thread's prior state (history, todos, title, ...); optional.
	State *state.State
	// Journal receives the run's lead-agent and middleware model calls; optional.
	Journal *journal.RunJournal
	// Sandbox for file and shell tools; optional.
	Sandbox sandbox.Sandbox
	// Caller overrides the caller tag; default "lead_agent" for the lead agent and
	// "subagent:<name>" otherwise.
	Caller string
	// AgentID is gen_ai.agent.id (execution id); default a fresh id.
	AgentID string
	// ToolCallID is the task call that dispatched this agent (subagents only).
	ToolCallID string
	// Context is the run context to use; default a fresh one.
	Context *RunContext
	// Emit receives custom stream events from tools; optional.
	Emit func(event string, payload map[string]any)
}

// Result is a finished run.
type Result struct {
	State      state.State
	Answer     string // text of the last AI message
	StopReason string
	Steps      int
	TraceID    string
	AgentID    string
	Context    *RunContext
}

// Run executes one invocation. See the package comment for hook order and errors.
func (a *Agent) Run(ctx context.Context, in Input) (*Result, error) {
	caller := in.Caller
	if caller == "" {
		caller = genai.BucketLeadAgent
		if a.cfg.Name != genai.LeadAgentName {
			caller = genai.SubagentCaller(a.cfg.Name)
		}
	}
	agentID := in.AgentID
	if agentID == "" {
		agentID = model.NewCallID()
	}
	rc := in.Context
	if rc == nil {
		rc = NewRunContext()
	}
	rt := &Runtime{
		ThreadID: in.ThreadID, RunID: in.RunID, UserID: in.UserID,
		AgentName: a.cfg.Name, AgentID: agentID, Caller: caller,
		Model: a.cfg.Model, Models: a.cfg.Models, Journal: in.Journal, Sandbox: in.Sandbox,
		Context: rc, Emit: in.Emit,
	}
	ctx = telemetry.WithRun(ctx, telemetry.Run{ThreadID: in.ThreadID, RunID: in.RunID, UserID: in.UserID})
	ctx = telemetry.WithCaller(ctx, caller)
	if in.Journal != nil {
		ctx = model.WithObserver(ctx, ObserveJournal(in.Journal))
	}
	attrs := append(telemetry.CommonAttributes(ctx, caller),
		attribute.String(genai.AttrOperationName, genai.OpInvokeAgent),
		attribute.String(genai.AttrAgentName, a.cfg.Name),
		attribute.String(genai.AttrAgentID, agentID),
	)
	if in.ToolCallID != "" {
		attrs = append(attrs, attribute.String(genai.AttrToolCallID, in.ToolCallID))
	}
	ctx, span := telemetry.Tracer(ctx).Start(ctx, genai.SpanName(genai.OpInvokeAgent, a.cfg.Name),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	defer span.End()

	res, err := a.run(ctx, rt, in)
	res.TraceID = span.SpanContext().TraceID().String()
	res.AgentID = agentID
	res.Context = rc
	res.StopReason = rc.StopReason()
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String(genai.AttrErrorType, runErrorType(err)))
		if in.Journal != nil {
			in.Journal.OnRunError(err)
		}
		return res, err
	}
	if in.Journal != nil {
		in.Journal.OnRunEnd("success")
	}
	return res, nil
}

func runErrorType(err error) string {
	switch {
	case errors.Is(err, ErrRecursionLimit):
		return "recursion_limit"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return fmt.Sprintf("%T", errors.Unwrap(err))
}

func (a *Agent) run(ctx context.Context, rt *Runtime, in Input) (*Result, error) {
	var st state.State
	if in.State != nil {
		st = *in.State
	}
	if in.Journal != nil {
		in.Journal.OnRunStart(rt.Caller)
		for _, m := range in.Messages {
			if m.Role == message.RoleHuman {
				in.Journal.OnHumanInput(m)
			}
		}
	}
	st = st.Apply(&state.Update{Messages: in.Messages})
	res := &Result{}
	finish := func(err error) (*Result, error) {
		res.State = st
		if i := message.LastAI(st.Messages); i >= 0 {
			res.Answer = st.Messages[i].Content
		}
		return res, err
	}

	end := false
	for _, h := range a.beforeAgent {
		if err := ctx.Err(); err != nil {
			return finish(fmt.Errorf("agent %s: %w", a.cfg.Name, err))
		}
		u, err := h.hook.BeforeAgent(ctx, rt, &st)
		if err != nil {
			return finish(fmt.Errorf("before_agent %s: %w", h.name, err))
		}
		st = st.Apply(u)
		if u != nil && u.JumpTo == state.JumpEnd {
			end = true
			break
		}
	}

	for !end {
		if err := ctx.Err(); err != nil {
			return finish(fmt.Errorf("agent %s: %w", a.cfg.Name, err))
		}
		if res.Steps >= a.cfg.RecursionLimit {
			return finish(fmt.Errorf("agent %s: %w (%d steps)", a.cfg.Name, ErrRecursionLimit, a.cfg.RecursionLimit))
		}
		res.Steps++
		// before_model, list order
		for _, h := range a.beforeModel {
			u, err := h.hook.BeforeModel(ctx, rt, &st)
			if err != nil {
				return finish(fmt.Errorf("before_model %s: %w", h.name, err))
			}
			st = st.Apply(u)
			if u != nil && u.JumpTo == state.JumpEnd {
				end = true
				break
			}
		}
		if end {
			break
		}
		jump, err := a.modelNode(ctx, rt, &st)
		if err != nil {
			return finish(err)
		}
		switch jump {
		case state.JumpModel:
			continue
		case state.JumpEnd:
			end = true
			continue
		}
		last := message.LastAI(st.Messages)
		if last < 0 || last != len(st.Messages)-1 || len(st.Messages[last].ToolCalls) == 0 {
			break // a final answer: no tool calls to run
		}
		if res.Steps >= a.cfg.RecursionLimit {
			return finish(fmt.Errorf("agent %s: %w (%d steps)", a.cfg.Name, ErrRecursionLimit, a.cfg.RecursionLimit))
		}
		res.Steps++
		jumpEnd, err := a.toolNode(ctx, rt, &st, st.Messages[last])
		if err != nil {
			return finish(err)
		}
		end = jumpEnd
	}

	for _, h := range a.afterAgent {
		u, err := h.hook.AfterAgent(ctx, rt, &st)
		if err != nil {
			return finish(fmt.Errorf("after_agent %s: %w", h.name, err))
		}
		st = st.Apply(u)
	}
	return finish(nil)
}

// modelNode runs wrap_model_call around the model and then after_model (reverse), with
// the chat span held open for the after_model hooks. It returns the jump target.
func (a *Agent) modelNode(ctx context.Context, rt *Runtime, st *state.State) (string, error) {
	msgs := st.Messages
	if a.cfg.SystemPrompt != "" {
		msgs = append([]message.Message{{ID: "system", Role: message.RoleSystem, Content: a.cfg.SystemPrompt}}, msgs...)
	}
	req := &ModelRequest{
		Request: &model.Request{Messages: msgs, Tools: a.specs},
		Model:   a.cfg.Model, State: st, Runtime: rt,
	}
	heldCtx, hold := model.HoldSpans(ctx)
	defer hold.Release()
	resp, err := a.modelChain(heldCtx, req)
	if err != nil {
		return "", fmt.Errorf("agent %s: model call: %w", a.cfg.Name, err)
	}
	if resp == nil {
		return "", fmt.Errorf("agent %s: model call returned no response", a.cfg.Name)
	}
	ai := resp.Message
	if ai.ID == "" {
		ai.ID = message.NewID()
	}
	*st = st.Apply(&state.Update{Messages: []message.Message{ai}})
	span := model.NoopSpan
	if resp.Response != nil && resp.Response.Span != nil {
		span = resp.Response.Span
	}
	hookCtx := model.WithResponseSpan(ctx, span)
	for _, h := range a.afterModel {
		u, err := h.hook.AfterModel(hookCtx, rt, st)
		if err != nil {
			return "", fmt.Errorf("after_model %s: %w", h.name, err)
		}
		*st = st.Apply(u)
		if u != nil && u.JumpTo != "" {
			return u.JumpTo, nil // remaining after_model hooks are skipped
		}
	}
	return "", nil
}

// callModel is the innermost model handler.
func callModel(ctx context.Context, req *ModelRequest) (*ModelResponse, error) {
	resp, err := req.Model.Generate(ctx, req.Request)
	if err != nil {
		return nil, err
	}
	msg := resp.Message
	if msg.ID == "" {
		msg.ID = message.NewID()
		resp.Message.ID = msg.ID
	}
	return &ModelResponse{Message: msg, Response: resp}, nil
}

// ObserveJournal adapts a RunJournal to model.Observer: every finished call with a
// response is accounted inline with its caller tag and call id.
func ObserveJournal(j *journal.RunJournal) model.Observer { return journalObserver{j} }

type journalObserver struct{ j *journal.RunJournal }

func (o journalObserver) ObserveModelCall(_ context.Context, rec model.CallRecord) {
	if rec.Response == nil {
		return
	}
	o.j.OnLLMEnd(rec.CallID, rec.Caller, []message.Message{rec.Response.Message}, rec.Duration)
}

func availableTools(r *tool.Registry) string {
	var names []string
	for _, t := range r.All() {
		names = append(names, t.Spec().Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
