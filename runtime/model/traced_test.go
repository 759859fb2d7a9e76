package model

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/config"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
)

type stubProvider struct {
	resp *Response
	err  error
	seen *Request
}

func (s *stubProvider) Generate(_ context.Context, req *Request) (*Response, error) {
	s.seen = req
	if s.err != nil {
		return nil, s.err
	}
	r := *s.resp
	return &r, nil
}

func setup(t *testing.T) (context.Context, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx := telemetry.WithTracerProvider(context.Background(), tp)
	ctx = telemetry.WithRun(ctx, telemetry.Run{ThreadID: "t1", RunID: "r1"})
	return ctx, exp
}

func attrs(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

type countingObserver struct {
	mu   sync.Mutex
	recs []CallRecord
}

func (c *countingObserver) ObserveModelCall(_ context.Context, r CallRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r)
}

func TestTracedSuccess(t *testing.T) {
	ctx, exp := setup(t)
	ai := message.AI("", message.ToolCall{ID: "call_1", Name: "task"}, message.ToolCall{ID: "call_2", Name: "task"})
	um := message.UsageFromGenAI(genai.Usage{Input: 100, Output: 20, CacheRead: 60, Reasoning: 5})
	ai.UsageMetadata = &um
	p := &stubProvider{resp: &Response{Message: ai, ID: "resp-1", Model: "gpt-4o-2024", FinishReasons: []string{"tool_calls"}}}
	m := Wrap(p, Info{Name: "main", Provider: "openai", Model: "gpt-4o", Stream: true})
	assert.Same(t, m, Wrap(m, Info{}), "never wrapped twice")
	obs := &countingObserver{}
	ctx = WithObserver(telemetry.WithCaller(ctx, "subagent:x"), obs)
	req := &Request{Messages: []message.Message{message.Human("hi")}}
	resp, err := m.Generate(ctx, req)
	require.NoError(t, err)
	assert.Nil(t, req.Stream, "caller's request is not modified")
	require.NotNil(t, p.seen.Stream)
	assert.True(t, *p.seen.Stream, "stream resolved from the model default")
	assert.Equal(t, "subagent:x", resp.Caller)
	assert.Len(t, resp.CallID, 32)
	require.Len(t, obs.recs, 1)
	assert.Equal(t, resp.CallID, obs.recs[0].CallID)

	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	s := spans[0]
	assert.Equal(t, "chat gpt-4o", s.Name)
	assert.Equal(t, "client", s.SpanKind.String())
	assert.Equal(t, map[string]any{
		genai.AttrConversationID: "t1", genai.AttrRunID: "r1", genai.AttrCaller: "subagent:x",
		genai.AttrOperationName: "chat", genai.AttrProviderName: "openai", genai.AttrRequestModel: "gpt-4o",
		genai.AttrRequestStream: true, genai.AttrResponseModel: "gpt-4o-2024", genai.AttrResponseID: "resp-1",
		genai.AttrFinishReasons: []string{"tool_calls"}, genai.AttrResponseToolCallIDs: []string{"call_1", "call_2"},
		genai.AttrUsageInput: int64(100), genai.AttrUsageOutput: int64(20), genai.AttrUsageCacheRead: int64(60),
		genai.AttrUsageReasoning: int64(5),
	}, attrs(s.Attributes))
}

func TestTracedNoUsageNoAttributesAndContentOptIn(t *testing.T) {
	ctx, exp := setup(t)
	p := &stubProvider{resp: &Response{Message: message.AI("hello")}}
	m := Wrap(p, Info{Provider: "openai", Model: "gpt"})
	_, err := m.Generate(telemetry.WithContentCapture(ctx, true), &Request{Caller: "middleware:title", Messages: []message.Message{message.Human("q")}})
	require.NoError(t, err)
	a := attrs(exp.GetSpans()[0].Attributes)
	assert.NotContains(t, a, genai.AttrUsageInput, "no usage reported means no usage attributes")
	assert.NotContains(t, a, genai.AttrResponseToolCallIDs)
	assert.Equal(t, "middleware:title", a[genai.AttrCaller], "request caller overrides the context")
	assert.JSONEq(t, `[{"role":"user","parts":[{"type":"text","content":"q"}]}]`, a[genai.AttrInputMessages].(string))
	assert.JSONEq(t, `[{"role":"assistant","parts":[{"type":"text","content":"hello"}]}]`, a[genai.AttrOutputMessages].(string))
	exp.Reset()
	_, err = m.Generate(ctx, &Request{})
	require.NoError(t, err)
	assert.NotContains(t, attrs(exp.GetSpans()[0].Attributes), genai.AttrInputMessages, "content is off by default")
}

func TestTracedError(t *testing.T) {
	ctx, exp := setup(t)
	obs := &countingObserver{}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&StatusError{Provider: "openai", StatusCode: 429, Message: "rate"}, "429"},
		{context.DeadlineExceeded, "timeout"},
		{errors.New("boom"), "*errors.errorString"},
	} {
		exp.Reset()
		m := Wrap(&stubProvider{err: tc.err}, Info{Provider: "openai", Model: "gpt"})
		_, err := m.Generate(WithObserver(ctx, obs), &Request{})
		require.ErrorIs(t, err, tc.err)
		s := exp.GetSpans()[0]
		assert.Equal(t, codes.Error, s.Status.Code)
		assert.Equal(t, tc.want, attrs(s.Attributes)[genai.AttrErrorType])
	}
	assert.Len(t, obs.recs, 3, "observers hear about failures too")
	assert.Error(t, obs.recs[0].Err)
	assert.True(t, IsRetryable(&StatusError{StatusCode: 503}))
	assert.False(t, IsRetryable(&StatusError{StatusCode: 400}))
}

func TestHoldSpansAndResponseSpan(t *testing.T) {
	ctx, exp := setup(t)
	m := Wrap(&stubProvider{resp: &Response{Message: message.AI("x")}}, Info{Provider: "p", Model: "m"})
	held, hold := HoldSpans(ctx)
	resp, err := m.Generate(held, &Request{})
	require.NoError(t, err)
	assert.Empty(t, exp.GetSpans(), "held span not ended yet")
	ResponseSpan(WithResponseSpan(ctx, resp.Span)).SetAttributes(attribute.String(genai.AttrStepKind, genai.StepFinalAnswer))
	hold.Release()
	hold.Release()
	require.Len(t, exp.GetSpans(), 1)
	assert.Equal(t, genai.StepFinalAnswer, attrs(exp.GetSpans()[0].Attributes)[genai.AttrStepKind])
	ResponseSpan(ctx).SetAttributes(attribute.String("x", "y")) // no-op outside a hold, must not panic
}

func TestIsolateObservers(t *testing.T) {
	ctx, _ := setup(t)
	parent, child := &countingObserver{}, &countingObserver{}
	m := Wrap(&stubProvider{resp: &Response{Message: message.AI("x")}}, Info{Provider: "p", Model: "m"})
	pctx := WithObserver(ctx, parent)
	_, _ = m.Generate(IsolateObservers(pctx, child), &Request{})
	_, _ = m.Generate(WithObserver(pctx, child), &Request{})
	assert.Len(t, parent.recs, 1, "isolated call not seen by the parent")
	assert.Len(t, child.recs, 2)
}

func TestRegistryAndFactory(t *testing.T) {
	Register("stub-test", func(cfg config.Model) (Provider, error) {
		if cfg.APIKeyEnv == "MISSING" {
			return nil, errors.New("api_key_env: MISSING is not set")
		}
		return &stubProvider{resp: &Response{Message: message.AI("ok")}}, nil
	})
	assert.Panics(t, func() { Register("stub-test", nil) })
	assert.Contains(t, Providers(), "stub-test")
	_, err := New(config.Model{Name: "x", Provider: "nope"})
	assert.ErrorContains(t, err, `model "x": provider "nope" is not available`)
	_, err = NewFactory([]config.Model{{Name: "a", Provider: "stub-test", APIKeyEnv: "MISSING"}})
	assert.EqualError(t, err, `model "a": api_key_env: MISSING is not set`)
	f, err := NewFactory([]config.Model{{Name: "a", Provider: "stub-test", Model: "m1"}, {Name: "b", Provider: "stub-test", Model: "m2"}})
	require.NoError(t, err)
	assert.Equal(t, "m1", f.Default().Info().Model)
	b, err := f.Get("b")
	require.NoError(t, err)
	assert.Equal(t, "m2", b.Info().Model)
	_, err = f.Get("c")
	assert.EqualError(t, err, `model "c" is not configured`)
}
