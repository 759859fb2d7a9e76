package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/journal"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/model"
	"github.com/agentmeter/agentmeter/runtime/state"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
	"github.com/agentmeter/agentmeter/runtime/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeProvider answers from a list of turns by the number of AI messages in the request.
type fakeProvider struct {
	turns []message.Message
	calls atomic.Int64
	delay time.Duration
}

func (f *fakeProvider) Generate(ctx context.Context, req *model.Request) (*model.Response, error) {
	f.calls.Add(1)
	if f.delay > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(f.delay):
		}
	}
	n := 0
	for _, m := range req.Messages {
		if m.IsAI() {
			n++
		}
	}
	if n >= len(f.turns) {
		n = len(f.turns) - 1
	}
	msg := f.turns[n].Clone()
	msg.ID = message.NewID()
	return &model.Response{Message: msg, ID: fmt.Sprintf("resp-%d", n), Model: "fake-1", FinishReasons: []string{"stop"}}, nil
}

func usage(in, out int64) *message.UsageMetadata {
	u := message.UsageMetadata{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	return &u
}

func aiTurn(content string, u *message.UsageMetadata, calls ...message.ToolCall) message.Message {
	m := message.AI(content, calls...)
	m.UsageMetadata = u
	m.ResponseMetadata = map[string]any{message.MetaModelName: "fake-1"}
	return m
}

func newModel(p model.Provider) model.ChatModel {
	return model.Wrap(p, model.Info{Name: "main", Provider: "fake", Model: "fake-1"})
}

// recorder is a middleware implementing every hook and logging each call.
type recorder struct {
	name string
	log  *[]string
	mu   *sync.Mutex
	am   func(st *state.State) *state.Update
}

func (r *recorder) Name() string { return r.name }
func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, r.name+"."+s)
}
func (r *recorder) BeforeAgent(context.Context, *Runtime, *state.State) (*state.Update, error) {
	r.add("before_agent")
	return nil, nil
}
func (r *recorder) BeforeModel(context.Context, *Runtime, *state.State) (*state.Update, error) {
	r.add("before_model")
	return nil, nil
}
func (r *recorder) AfterModel(_ context.Context, _ *Runtime, st *state.State) (*state.Update, error) {
	r.add("after_model")
	if r.am != nil {
		return r.am(st), nil
	}
	return nil, nil
}
func (r *recorder) AfterAgent(context.Context, *Runtime, *state.State) (*state.Update, error) {
	r.add("after_agent")
	return nil, nil
}
func (r *recorder) WrapModelCall(ctx context.Context, req *ModelRequest, next ModelHandler) (*ModelResponse, error) {
	r.add("wrap_model>")
	resp, err := next(ctx, req)
	r.add("wrap_model<")
	return resp, err
}
func (r *recorder) WrapToolCall(ctx context.Context, req *ToolRequest, next ToolHandler) (*ToolResponse, error) {
	r.add("wrap_tool>")
	resp, err := next(ctx, req)
	r.add("wrap_tool<")
	return resp, err
}

// echoTool returns its "text" argument.
type echoTool struct {
	name  string
	delay time.Duration
	fail  error
	inFly *atomic.Int64
	peak  *atomic.Int64
}

func (e echoTool) Spec() tool.Spec {
	return tool.Spec{Name: e.name, Parameters: map[string]any{"type": "object", "required": []string{"text"},
		"properties": map[string]any{"text": map[string]any{"type": "string"}}}}
}

func (e echoTool) Call(ctx context.Context, call tool.Call) (tool.Result, error) {
	if e.inFly != nil {
		n := e.inFly.Add(1)
		defer e.inFly.Add(-1)
		for {
			p := e.peak.Load()
			if n <= p || e.peak.CompareAndSwap(p, n) {
				break
			}
		}
	}
	if e.delay > 0 {
		select {
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		case <-time.After(e.delay):
		}
	}
	if e.fail != nil {
		return tool.Result{}, e.fail
	}
	return tool.Result{Content: call.Args["text"].(string)}, nil
}

func call(id, name, text string) message.ToolCall {
	return message.ToolCall{ID: id, Name: name, Args: map[string]any{"text": text}}
}

func TestHookOrdering(t *testing.T) {
	var log []string
	var mu sync.Mutex
	mk := func(n string) *recorder { return &recorder{name: n, log: &log, mu: &mu} }
	p := &fakeProvider{turns: []message.Message{
		aiTurn("", usage(10, 2), call("c1", "echo", "hi")),
		aiTurn("done", usage(20, 3)),
	}}
	a, err := New(Config{Model: newModel(p), Tools: []tool.Tool{echoTool{name: "echo"}}, Middlewares: []Middleware{mk("m0"), mk("m1"), mk("m2")}})
	require.NoError(t, err)
	res, err := a.Run(context.Background(), Input{ThreadID: "t", RunID: "r", Messages: []message.Message{message.Human("go")}})
	require.NoError(t, err)
	assert.Equal(t, "done", res.Answer)
	modelRound := []string{
		"m0.before_model", "m1.before_model", "m2.before_model",
		"m0.wrap_model>", "m1.wrap_model>", "m2.wrap_model>", "m2.wrap_model<", "m1.wrap_model<", "m0.wrap_model<",
		"m2.after_model", "m1.after_model", "m0.after_model",
	}
	want := []string{"m0.before_agent", "m1.before_agent", "m2.before_agent"}
	want = append(want, modelRound...)
	want = append(want, "m0.wrap_tool>", "m1.wrap_tool>", "m2.wrap_tool>", "m2.wrap_tool<", "m1.wrap_tool<", "m0.wrap_tool<")
	want = append(want, modelRound...)
	want = append(want, "m2.after_agent", "m1.after_agent", "m0.after_agent")
	assert.Equal(t, want, log)
	require.Len(t, res.State.Messages, 4)
	assert.Equal(t, message.RoleTool, res.State.Messages[2].Role)
	assert.Equal(t, "hi", res.State.Messages[2].Content)
	assert.Equal(t, "c1", res.State.Messages[2].ToolCallID)
	assert.Equal(t, 3, res.Steps, "two model calls and one tool batch")
}

func TestJumpToModelSkipsRemainingAfterModelAndTools(t *testing.T) {
	var log []string
	var mu sync.Mutex
	jumped := false
	m0 := &recorder{name: "m0", log: &log, mu: &mu}
	m1 := &recorder{name: "m1", log: &log, mu: &mu, am: func(st *state.State) *state.Update {
		if jumped {
			return nil
		}
		jumped = true
		// Drop the tool calls of the response and ask for another model call.
		last := st.Messages[len(st.Messages)-1].Clone()
		last.ToolCalls = nil
		last.Content = "retry me"
		return &state.Update{Messages: []message.Message{last}, JumpTo: state.JumpModel}
	}}
	p := &fakeProvider{turns: []message.Message{aiTurn("", nil, call("c1", "echo", "x")), aiTurn("final", nil)}}
	a, err := New(Config{Model: newModel(p), Tools: []tool.Tool{echoTool{name: "echo"}}, Middlewares: []Middleware{m0, m1}})
	require.NoError(t, err)
	res, err := a.Run(context.Background(), Input{Messages: []message.Message{message.Human("go")}})
	require.NoError(t, err)
	assert.Equal(t, "final", res.Answer)
	assert.Equal(t, int64(2), p.calls.Load())
	afterModels := []string{}
	for _, l := range log {
		if strings.HasSuffix(l, "after_model") || strings.HasSuffix(l, "wrap_tool>") {
			afterModels = append(afterModels, l)
		}
	}
	assert.Equal(t, []string{"m1.after_model", "m1.after_model", "m0.after_model"}, afterModels,
		"m0's after_model is skipped for the jumped response; no tool ran")
}

type endBefore struct{}

func (endBefore) Name() string { return "end-before" }
func (endBefore) BeforeModel(context.Context, *Runtime, *state.State) (*state.Update, error) {
	return &state.Update{JumpTo: state.JumpEnd, Messages: []message.Message{message.AI("stopped early")}}, nil
}

type afterAgentCount struct{ n *atomic.Int64 }

func (afterAgentCount) Name() string { return "count" }
func (c afterAgentCount) AfterAgent(context.Context, *Runtime, *state.State) (*state.Update, error) {
	c.n.Add(1)
	return nil, nil
}

func TestJumpToEndFromBeforeModelRunsAfterAgent(t *testing.T) {
	var n atomic.Int64
	p := &fakeProvider{turns: []message.Message{aiTurn("never", nil)}}
	a, err := New(Config{Model: newModel(p), Middlewares: []Middleware{endBefore{}, afterAgentCount{&n}}})
	require.NoError(t, err)
	res, err := a.Run(context.Background(), Input{Messages: []message.Message{message.Human("go")}})
	require.NoError(t, err)
	assert.Zero(t, p.calls.Load())
	assert.Equal(t, "stopped early", res.Answer)
	assert.Equal(t, int64(1), n.Load())
}

type clarifyTool struct{}

func (clarifyTool) Spec() tool.Spec { return tool.Spec{Name: "ask"} }
func (clarifyTool) Call(context.Context, tool.Call) (tool.Result, error) {
	return tool.Result{Content: "which one?", Update: &state.Update{JumpTo: state.JumpEnd}}, nil
}

func TestToolJumpEndStopsRun(t *testing.T) {
	p := &fakeProvider{turns: []message.Message{aiTurn("", nil, message.ToolCall{ID: "c", Name: "ask"}), aiTurn("never", nil)}}
	a, err := New(Config{Model: newModel(p), Tools: []tool.Tool{clarifyTool{}}})
	require.NoError(t, err)
	res, err := a.Run(context.Background(), Input{Messages: []message.Message{message.Human("go")}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), p.calls.Load())
	assert.Equal(t, "which one?", res.State.Messages[len(res.State.Messages)-1].Content)
}

func TestToolCallsRunConcurrentlyInOrder(t *testing.T) {
	var inFly, peak atomic.Int64
	slow := echoTool{name: "echo", delay: 50 * time.Millisecond, inFly: &inFly, peak: &peak}
	calls := []message.ToolCall{call("a", "echo", "1"), call("b", "echo", "2"), call("c", "echo", "3"), call("d", "echo", "4")}
	p := &fakeProvider{turns: []message.Message{aiTurn("", nil, calls...), aiTurn("ok", nil)}}
	a, err := New(Config{Model: newModel(p), Tools: []tool.Tool{slow}})
	require.NoError(t, err)
	res, err := a.Run(context.Background(), Input{Messages: []message.Message{message.Human("go")}})
	require.NoError(t, err)
	assert.Equal(t, int64(4), peak.Load(), "all four calls were in flight at once")
	var ids []string
	for _, m := range res.State.Messages {
		if m.IsTool() {
			ids = append(ids, m.ToolCallID)
		}
	}
	assert.Equal(t, []string{"a", "b", "c", "d"}, ids, "tool messages in tool-call order")

	peak.Store(0)
	a, err = New(Config{Model: newModel(p), Tools: []tool.Tool{slow}, ToolConcurrency: 2})
	require.NoError(t, err)
	_, err = a.Run(context.Background(), Input{Messages: []message.Message{message.Human("go")}})
	require.NoError(t, err)
	assert.Equal(t, int64(2), peak.Load(), "bounded concurrency")
}

func TestToolErrorsBecomeErrorMessages(t *testing.T) {
	p := &fakeProvider{turns: []message.Message{
		aiTurn("", nil, call("a", "boom", "x"), message.ToolCall{ID: "b", Name: "echo", Args: map[string]any{"text": 3.0}},
			call("c", "nope", "x"), message.ToolCall{ID: "d", Name: "echo"}),
		aiTurn("ok", nil)}}
	a, err := New(Config{Model: newModel(p), Tools: []tool.Tool{echoTool{name: "echo"}, echoTool{name: "boom", fail: errors.New("disk full")}}})
	require.NoError(t, err)
	res, err := a.Run(context.Background(), Input{Messages: []message.Message{message.Human("go")}})
	require.NoError(t, err)
	got := map[string]message.Message{}
	for _, m := range res.State.Messages {
		if m.IsTool() {
			got[m.ToolCallID] = m
		}
	}
	assert.Equal(t, message.ToolError, got["a"].Status)
	assert.Equal(t, "Error: boom: disk full", got["a"].Content)
	assert.Equal(t, "Error: invalid arguments for echo: text: must be a string, got number", got["b"].Content)
	assert.Contains(t, got["c"].Content, "nope is not a valid tool, try one of [boom, echo]")
	assert.Equal(t, "Error: invalid arguments for echo: text: is required", got["d"].Content)
}

func TestRecursionLimit(t *testing.T) {
	p := &fakeProvider{turns: []message.Message{aiTurn("", nil, call("a", "echo", "x"))}} // loops forever
	a, err := New(Config{Model: newModel(p), Tools: []tool.Tool{echoTool{name: "echo"}}, RecursionLimit: 5})
	require.NoError(t, err)
	_, err = a.Run(context.Background(), Input{Messages: []message.Message{message.Human("go")}})
	require.ErrorIs(t, err, ErrRecursionLimit)
	assert.Equal(t, int64(3), p.calls.Load(), "steps: model, tools, model, tools, model")
}

func TestCancellationStopsModelAndTools(t *testing.T) {
	p := &fakeProvider{turns: []message.Message{aiTurn("", nil, call("a", "echo", "x"))}}
	a, err := New(Config{Model: newModel(p), Tools: []tool.Tool{echoTool{name: "echo", delay: 10 * time.Second}}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = a.Run(ctx, Input{Messages: []message.Message{message.Human("go")}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)

	slowModel := &fakeProvider{turns: []message.Message{aiTurn("x", nil)}, delay: 10 * time.Second}
	a, err = New(Config{Model: newModel(slowModel)})
	require.NoError(t, err)
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel2)
	_, err = a.Run(ctx2, Input{Messages: []message.Message{message.Human("go")}})
	require.ErrorIs(t, err, context.Canceled)
}

func TestNewValidates(t *testing.T) {
	_, err := New(Config{})
	assert.EqualError(t, err, "agent: model is required")
	m := newModel(&fakeProvider{turns: []message.Message{aiTurn("x", nil)}})
	_, err = New(Config{Model: m, Middlewares: []Middleware{endBefore{}, endBefore{}}})
	assert.ErrorContains(t, err, `middleware "end-before" appears twice`)
	_, err = New(Config{Model: m, Tools: []tool.Tool{echoTool{name: "e"}, echoTool{name: "e"}}})
	assert.ErrorContains(t, err, `tool "e" registered twice`)
	_, err = New(Config{Model: m, Middlewares: []Middleware{noHooks{}}})
	assert.ErrorContains(t, err, "implements no hook")
}

type noHooks struct{}

func (noHooks) Name() string { return "none" }

// stepKind annotates the held chat span like TokenUsageMiddleware will.
type stepKind struct{}

func (stepKind) Name() string { return "step-kind" }
func (stepKind) AfterModel(ctx context.Context, _ *Runtime, st *state.State) (*state.Update, error) {
	kind := genai.StepFinalAnswer
	if len(st.Messages[len(st.Messages)-1].ToolCalls) > 0 {
		kind = genai.StepToolBatch
	}
	model.ResponseSpan(ctx).SetAttributes(attribute.String(genai.AttrStepKind, kind))
	return nil, nil
}

func TestSpansAndJournal(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx := telemetry.WithTracerProvider(context.Background(), tp)

	p := &fakeProvider{turns: []message.Message{
		aiTurn("", usage(100, 10), call("c1", "echo", "hi"), call("c2", "boom", "x")),
		aiTurn("done", usage(200, 20)),
	}}
	a, err := New(Config{Model: newModel(p), Middlewares: []Middleware{stepKind{}},
		Tools: []tool.Tool{echoTool{name: "echo"}, echoTool{name: "boom", fail: errors.New("bad")}}})
	require.NoError(t, err)
	j := journal.New(journal.Options{RunID: "run-1", ThreadID: "thread-1"})
	res, err := a.Run(ctx, Input{ThreadID: "thread-1", RunID: "run-1", UserID: "u1", Journal: j,
		Messages: []message.Message{message.Human("go")}})
	require.NoError(t, err)

	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	require.Len(t, byName["invoke_agent lead_agent"], 1)
	root := byName["invoke_agent lead_agent"][0]
	assert.False(t, root.Parent.IsValid(), "root span")
	assert.Equal(t, res.TraceID, root.SpanContext.TraceID().String())
	require.Len(t, byName["chat fake-1"], 2)
	require.Len(t, byName["execute_tool echo"], 1)
	require.Len(t, byName["execute_tool boom"], 1)
	var ownTotal int64
	for _, s := range spans {
		attrs := attrMap(s.Attributes)
		assert.Equal(t, "thread-1", attrs[genai.AttrConversationID], s.Name)
		assert.Equal(t, "run-1", attrs[genai.AttrRunID], s.Name)
		assert.Equal(t, "u1", attrs[genai.AttrEndUserID], s.Name)
		assert.Equal(t, "lead_agent", attrs[genai.AttrCaller], s.Name)
		if s.Name != root.Name {
			assert.Equal(t, root.SpanContext.SpanID(), s.Parent.SpanID(), "%s parent is the invoke_agent span", s.Name)
		}
		if strings.HasPrefix(s.Name, "chat ") {
			ownTotal += attrs[genai.AttrUsageInput].(int64) + attrs[genai.AttrUsageOutput].(int64)
		}
	}
	first := attrMap(byName["chat fake-1"][0].Attributes)
	assert.Equal(t, []string{"c1", "c2"}, first[genai.AttrResponseToolCallIDs])
	assert.Equal(t, genai.StepToolBatch, first[genai.AttrStepKind], "after_model annotated the held span")
	assert.Equal(t, genai.StepFinalAnswer, attrMap(byName["chat fake-1"][1].Attributes)[genai.AttrStepKind])
	assert.Equal(t, "chat", first[genai.AttrOperationName])
	assert.Equal(t, "fake", first[genai.AttrProviderName])
	assert.Equal(t, "fake-1", first[genai.AttrResponseModel])
	assert.Equal(t, "resp-0", first[genai.AttrResponseID])
	boom := byName["execute_tool boom"][0]
	assert.Equal(t, "Error", boom.Status.Code.String())
	assert.Equal(t, "tool_error", attrMap(boom.Attributes)[genai.AttrErrorType])
	echo := attrMap(byName["execute_tool echo"][0].Attributes)
	assert.Equal(t, "c1", echo[genai.AttrToolCallID])
	assert.Equal(t, "function", echo[genai.AttrToolType])

	d := j.CompletionData()
	assert.Equal(t, ownTotal, d.TotalTokens, "own usage sum == journal total")
	assert.Equal(t, int64(330), d.TotalTokens)
	assert.Equal(t, int64(2), d.LLMCallCount)
	assert.Equal(t, "done", d.LastAIMessage)
	assert.Equal(t, "go", d.FirstHumanMessage)
	assert.Equal(t, int64(5), d.MessageCount, "human + 2 AI + 2 tool results")
}

func attrMap(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}
