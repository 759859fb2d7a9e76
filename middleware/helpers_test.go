package middleware

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentmeter/agentmeter/runtime/agent"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

// fakeClock is a manual clock; Sleep records the delay and advances time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

func testRuntime() *agent.Runtime {
	return &agent.Runtime{ThreadID: "thread-1", RunID: "run-1", UserID: "user-1", AgentName: "lead_agent",
		AgentID: "agent-1", Caller: "lead_agent", Context: agent.NewRunContext()}
}

func human(id, content string) message.Message {
	return message.Message{ID: id, Role: message.RoleHuman, Content: content}
}

func aiMsg(id, content string, calls ...message.ToolCall) message.Message {
	m := message.Message{ID: id, Role: message.RoleAI, Content: content, ToolCalls: calls}
	if len(calls) > 0 {
		m.ResponseMetadata = map[string]any{message.MetaFinishReason: "tool_calls"}
	} else {
		m.ResponseMetadata = map[string]any{message.MetaFinishReason: "stop"}
	}
	return m
}

func call(id, name string, args map[string]any) message.ToolCall {
	if args == nil {
		args = map[string]any{}
	}
	return message.ToolCall{ID: id, Name: name, Args: args}
}

func toolMsg(id, callID, name, content string) message.Message {
	m := message.Tool(callID, name, content, message.ToolSuccess)
	m.ID = id
	return m
}

func st(msgs ...message.Message) *state.State { return &state.State{Messages: msgs} }

// scriptedProvider answers each call with the next function result; it records requests.
type scriptedProvider struct {
	mu    sync.Mutex
	turns []func(req *model.Request) (*model.Response, error)
	reqs  []*model.Request
}

func (p *scriptedProvider) Generate(_ context.Context, req *model.Request) (*model.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	i := len(p.reqs) - 1
	if i >= len(p.turns) {
		return &model.Response{Message: aiMsg("", "done")}, nil
	}
	return p.turns[i](req)
}

func (p *scriptedProvider) requests() []*model.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*model.Request(nil), p.reqs...)
}

func reply(m message.Message) func(*model.Request) (*model.Response, error) {
	return func(*model.Request) (*model.Response, error) {
		m.ID = ""
		return &model.Response{Message: m.Clone(), FinishReasons: []string{finishReason(m)}}, nil
	}
}

func fail(err error) func(*model.Request) (*model.Response, error) {
	return func(*model.Request) (*model.Response, error) { return nil, err }
}

// okHandler is an innermost model handler returning a fixed AI message.
func okHandler(content string) agent.ModelHandler {
	return func(context.Context, *agent.ModelRequest) (*agent.ModelResponse, error) {
		return &agent.ModelResponse{Message: aiMsg(message.NewID(), content)}, nil
	}
}

func modelReq(rt *agent.Runtime, msgs ...message.Message) *agent.ModelRequest {
	return &agent.ModelRequest{Request: &model.Request{Messages: msgs}, State: st(msgs...), Runtime: rt}
}

func mustApply(t *testing.T, s *state.State, u *state.Update) *state.State {
	t.Helper()
	require.NotNil(t, u)
	out := s.Apply(u)
	return &out
}

type (
	modelRequest  = model.Request
	modelResponse = model.Response
)

// taskStub is a task tool that answers at once.
type taskStub struct{}

func (taskStub) Spec() tool.Spec {
	return tool.Spec{Name: "task", Description: "task", Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}
}
func (taskStub) Call(context.Context, tool.Call) (tool.Result, error) {
	return tool.Result{Content: "done", AdditionalKwargs: map[string]any{message.KwargSubagentStatus: "completed"}}, nil
}
