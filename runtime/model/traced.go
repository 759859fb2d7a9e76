package model

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmeter/agentmeter/genai"
	"github.com/agentmeter/agentmeter/runtime/message"
	"github.com/agentmeter/agentmeter/runtime/telemetry"
)

// SpanAnnotator adds attributes to a chat span. trace.Span satisfies it.
type SpanAnnotator interface {
	SetAttributes(kv ...attribute.KeyValue)
}

type noopAnnotator struct{}

func (noopAnnotator) SetAttributes(...attribute.KeyValue) {}

// NoopSpan is the annotator of untraced calls.
var NoopSpan SpanAnnotator = noopAnnotator{}

// CallRecord is what observers learn about one finished model call.
type CallRecord struct {
	CallID string
	Caller string
	Info   Info
	// Request is the request as the provider received it (read-only for observers).
	Request  *Request
	Response *Response // nil when Err != nil
	Err      error
	Start    time.Time
	Duration time.Duration
}

// Observer is told about every model call made through a traced model with a context
// carrying it: the RunJournal (lead-agent and middleware calls) and a subagent's token
// collector. ObserveModelCall runs synchronously on the calling goroutine after the
// provider returned and before Generate returns; it must be fast and safe for concurrent
// use (parallel subagents and tool calls), and must not modify the response.
type Observer interface {
	ObserveModelCall(ctx context.Context, rec CallRecord)
}

type observersKey struct{}

// WithObserver returns ctx whose model calls are also reported to o (in addition to the
// observers already in ctx).
func WithObserver(ctx context.Context, o Observer) context.Context {
	prev, _ := ctx.Value(observersKey{}).([]Observer)
	next := make([]Observer, 0, len(prev)+1)
	next = append(append(next, prev...), o)
	return context.WithValue(ctx, observersKey{}, next)
}

// IsolateObservers returns ctx whose model calls are reported only to obs, dropping the
// observers inherited from the parent. The subagent executor uses it so the parent's
// RunJournal never sees a subagent's calls inline — they reach it once, as external
// records (DeerFlow's SubagentResult), which prevents double counting.
func IsolateObservers(ctx context.Context, obs ...Observer) context.Context {
	return context.WithValue(ctx, observersKey{}, append([]Observer(nil), obs...))
}

func observersFrom(ctx context.Context) []Observer {
	o, _ := ctx.Value(observersKey{}).([]Observer)
	return o
}

// SpanHold keeps the chat spans of successful calls open until Release.
type SpanHold struct {
	mu    sync.Mutex
	spans []trace.Span
	done  bool
}

type holdKey struct{}

// HoldSpans returns a context under which successful chat spans are not ended by
// Generate but collected by the hold; Release ends them. Release is idempotent and safe to
// call from any goroutine; a span collected after Release is ended at once.
func HoldSpans(ctx context.Context) (context.Context, *SpanHold) {
	h := &SpanHold{}
	return context.WithValue(ctx, holdKey{}, h), h
}

func (h *SpanHold) add(s trace.Span) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		s.End()
		return
	}
	h.spans = append(h.spans, s)
}

// Release ends every held span.
func (h *SpanHold) Release() {
	h.mu.Lock()
	spans := h.spans
	h.spans, h.done = nil, true
	h.mu.Unlock()
	for _, s := range spans {
		s.End()
	}
}

type responseSpanKey struct{}

// WithResponseSpan returns ctx whose ResponseSpan is s (the agent loop sets it for the
// after_model hooks of a response).
func WithResponseSpan(ctx context.Context, s SpanAnnotator) context.Context {
	return context.WithValue(ctx, responseSpanKey{}, s)
}

// ResponseSpan returns the chat span of the response the current after_model hook is
// looking at, or a no-op annotator. TokenUsageMiddleware sets agentmeter.step.kind with it.
func ResponseSpan(ctx context.Context) SpanAnnotator {
	if s, ok := ctx.Value(responseSpanKey{}).(SpanAnnotator); ok && s != nil {
		return s
	}
	return NoopSpan
}

// NewCallID returns a fresh model-call id.
func NewCallID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// traced wraps a Provider with the chat span and observers.
type traced struct {
	p    Provider
	info Info
}

// Wrap returns p as a ChatModel whose every call emits one chat span (docs/contract.md#spans) and
// notifies the context's observers. New applies it to every configured model; Wrap is
// exported for tests and embedders with hand-built providers.
func Wrap(p Provider, info Info) ChatModel {
	if t, ok := p.(*traced); ok {
		return t // never two spans for one call
	}
	return &traced{p: p, info: info}
}

func (t *traced) Info() Info { return t.info }

// Generate runs one traced call. The span is a child of the span in ctx (the caller's
// invoke_agent span).
func (t *traced) Generate(ctx context.Context, req *Request) (*Response, error) {
	if req == nil {
		return nil, errors.New("model: nil request")
	}
	caller := req.Caller
	if caller == "" {
		caller = telemetry.CallerFrom(ctx)
	}
	r := *req // shallow copy: the caller's request is not changed
	if r.Stream == nil {
		s := t.info.Stream
		r.Stream = &s
	}
	callID := NewCallID()
	attrs := append(telemetry.CommonAttributes(ctx, caller),
		attribute.String(genai.AttrOperationName, genai.OpChat),
		attribute.String(genai.AttrProviderName, t.info.Provider),
		attribute.String(genai.AttrRequestModel, t.info.Model),
		attribute.Bool(genai.AttrRequestStream, *r.Stream),
	)
	capture := telemetry.ContentCapture(ctx)
	if capture {
		attrs = append(attrs, attribute.String(genai.AttrInputMessages, inputMessagesJSON(r.Messages)))
	}
	ctx, span := telemetry.Tracer(ctx).Start(ctx, genai.SpanName(genai.OpChat, t.info.Model),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))

	start := time.Now()
	resp, err := t.p.Generate(ctx, &r)
	if err == nil && resp == nil {
		err = fmt.Errorf("model %s: provider returned neither a response nor an error", t.info.Name)
	}
	rec := CallRecord{CallID: callID, Caller: caller, Info: t.info, Request: &r, Err: err, Start: start, Duration: time.Since(start)}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String(genai.AttrErrorType, ErrorType(err)))
		span.End()
		for _, o := range observersFrom(ctx) {
			o.ObserveModelCall(ctx, rec)
		}
		return nil, err
	}
	resp.CallID, resp.Caller = callID, caller
	if resp.Model == "" {
		resp.Model = resp.Message.ModelName()
	}
	span.SetAttributes(responseAttributes(resp, capture)...)
	resp.Span = span
	rec.Response = resp
	for _, o := range observersFrom(ctx) {
		o.ObserveModelCall(ctx, rec)
	}
	if h, ok := ctx.Value(holdKey{}).(*SpanHold); ok {
		h.add(span)
	} else {
		span.End()
	}
	return resp, nil
}

func responseAttributes(resp *Response, capture bool) []attribute.KeyValue {
	var kv []attribute.KeyValue
	if resp.Model != "" {
		kv = append(kv, attribute.String(genai.AttrResponseModel, resp.Model))
	}
	if resp.ID != "" {
		kv = append(kv, attribute.String(genai.AttrResponseID, resp.ID))
	}
	if len(resp.FinishReasons) > 0 {
		kv = append(kv, attribute.StringSlice(genai.AttrFinishReasons, resp.FinishReasons))
	}
	if ids := resp.Message.ToolCallIDs(); len(ids) > 0 {
		kv = append(kv, attribute.StringSlice(genai.AttrResponseToolCallIDs, ids))
	}
	if um := resp.Message.UsageMetadata; um != nil {
		kv = append(kv, um.GenAI().Attributes()...)
		if h := um.CacheCreation1h(); h > 0 {
			kv = append(kv, attribute.Int64(genai.AttrUsageCacheCreat1h, h))
		}
	}
	if c, ok := resp.Message.ProviderCostUSD(); ok {
		kv = append(kv, genai.Cost{Total: c}.Attributes(genai.CostSourceProvider)...)
	}
	if capture {
		kv = append(kv, attribute.String(genai.AttrOutputMessages, outputMessagesJSON(resp)))
	}
	return kv
}

// ErrorType is the error.type value for a failed call: the HTTP status code for backend
// errors, "timeout" / "cancelled" for context errors, else the Go type of the error.
func ErrorType(err error) string {
	var se *StatusError
	switch {
	case errors.As(err, &se):
		return strconv.Itoa(se.StatusCode)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	default:
		return fmt.Sprintf("%T", err)
	}
}

// semconv message shapes (gen_ai.input.messages / gen_ai.output.messages).
type semPart struct {
	Type      string         `json:"type"`
	Content   string         `json:"content,omitempty"`
	ID        string         `json:"id,omitempty"`
	Name      string         `json:"name,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Response  string         `json:"response,omitempty"`
}

type semMessage struct {
	Role         string    `json:"role"`
	Parts        []semPart `json:"parts"`
	FinishReason string    `json:"finish_reason,omitempty"`
}

func semRole(r message.Role) string {
	switch r {
	case message.RoleHuman:
		return "user"
	case message.RoleAI:
		return "assistant"
	default:
		return string(r)
	}
}

func toSem(m message.Message) semMessage {
	sm := semMessage{Role: semRole(m.Role)}
	switch {
	case m.Role == message.RoleTool:
		sm.Parts = append(sm.Parts, semPart{Type: "tool_call_response", ID: m.ToolCallID, Response: m.Content})
	default:
		if m.Content != "" {
			sm.Parts = append(sm.Parts, semPart{Type: "text", Content: m.Content})
		}
		for _, tc := range m.ToolCalls {
			sm.Parts = append(sm.Parts, semPart{Type: "tool_call", ID: tc.ID, Name: tc.Name, Arguments: tc.Args})
		}
	}
	return sm
}

func inputMessagesJSON(msgs []message.Message) string {
	out := make([]semMessage, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, toSem(m))
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func outputMessagesJSON(resp *Response) string {
	sm := toSem(resp.Message)
	if len(resp.FinishReasons) > 0 {
		sm.FinishReason = resp.FinishReasons[0]
	}
	b, _ := json.Marshal([]semMessage{sm})
	return string(b)
}
